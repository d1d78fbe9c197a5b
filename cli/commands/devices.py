"""`hlogen devices`: every declared backend (hlogen.backends) and its devices."""
from __future__ import annotations

import os

import click

from hlogen import backends
from hlogen.backends import Kind
from hlogen.errors import HlogenError
from hlogen_cli.reporting import reports_errors


@click.command()
@reports_errors
def command():
    """List the backends and devices hlogen can run on."""
    from hlogen.runtime import pjrt  # here, not at the top: start-up (it starts jax)
    for backend in backends.BACKENDS.values():
        if backend.kind is Kind.INTERPRETER:
            click.echo(f"{backend.name}: {backend.description}; {_refusals(backend)}")
            continue
        try:
            client = pjrt.client(backend.platform)
        except HlogenError:
            click.echo(f"{backend.name}: not available here: {backend.description}")
            continue
        found = client.local_devices()
        if backend.platform == "cpu":  # XLA CPU's devices are not cores: say so
            cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
                else os.cpu_count()
            click.echo(f"{backend.name}: {len(found)} virtual devices (ids {found[0].id}-"
                       f"{found[-1].id}, {client.platform} {client.platform_version}) that "
                       f"share this machine's {cores} core{'s' * (cores != 1)}: XLA CPU runs "
                       f"one replica per device (HLOGEN_CPU_DEVICES sets how many it starts; "
                       f"run --replicas N starts at least N)")
            continue
        for d in found:
            click.echo(f"{backend.name}: {d.device_kind} (id {d.id}, {client.platform} "
                       f"{client.platform_version})")


def _refusals(backend) -> str:
    """What the declaration refuses, in words: the ops always, then those in some forms."""
    short = {when: sorted(name.split(".", 1)[-1] for name, r in backend.refuses.items()
                          if (r.when is None) == when) for when in (True, False)}
    return (f"it does not run {', '.join(short[True])}, nor some forms of "
            f"{', '.join(short[False])}")
