"""`hlogen cache`: the executable cache of run and compile."""
from __future__ import annotations

import importlib.metadata

import click

from hlogen.runtime.cache import ExecutableCache
from hlogen_cli.reporting import reports_errors


@click.group()
def command():
    """The executable cache of run and compile ($HLOGEN_CACHE_DIR, else
    $XDG_CACHE_HOME/hlogen, else ~/.cache/hlogen)."""


def _jaxlib_version() -> str:
    return importlib.metadata.version("jaxlib")


@command.command()
@reports_errors
def info():
    """Where the cache is, and how many entries it holds (valid, stale, corrupt)."""
    store = ExecutableCache()
    entries = store.entries(_jaxlib_version())
    click.echo(f"directory: {store.directory}")
    click.echo(f"entries: {len(entries)} ({sum(e.size for e in entries)} bytes)")
    for status in ("valid", "stale", "corrupt"):
        count = sum(e.status == status for e in entries)
        click.echo(f"  {status}: {count}")


@command.command()
@click.option("--invalid-only", is_flag=True, help="Remove only stale and corrupt entries.")
@reports_errors
def clear(invalid_only):
    """Remove the cached executables."""
    store = ExecutableCache()
    removed = store.clear(only_invalid=invalid_only, jaxlib_version=_jaxlib_version())
    click.echo(f"removed {removed} entr{'y' if removed == 1 else 'ies'} from {store.directory}")
