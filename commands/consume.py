import click

@click.command()
def consume():
    """Consume records."""
