import click

@click.group()
def groups():
    """Consumer groups and lag."""
