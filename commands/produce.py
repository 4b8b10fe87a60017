import click

@click.command()
def produce():
    """Produce records."""
