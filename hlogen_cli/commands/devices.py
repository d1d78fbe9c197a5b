"""`hlogen devices`: every declared backend (hlogen.backends) and its devices."""
from __future__ import annotations

import click

from hlogen import backends
from hlogen.errors import HlogenError
from hlogen.runtime import plugins
from hlogen_cli.options import plugin_option
from hlogen_cli.reporting import reports_errors


@click.command()
@plugin_option
@reports_errors
def command():
    """List the backends and devices hlogen can run on: jaxlib's cpu and gpu, the
    StableHLO reference interpreter, and every PJRT plugin installed or given with
    --plugin (each loaded in a child process first, so that one that crashes is listed
    as not available, with why)."""
    from hlogen.runtime import pjrt  # here, not at the top: start-up (it starts jax)
    plugins.discover(isolate=True)
    for backend in backends.declared():
        if not backend.compiles:  # in this process: no client, no devices
            click.echo(f"{backend.name}: {backend.description}; {_refusals(backend)}")
            continue
        if backend.identity:  # a plugin: what loading it learned
            facts = backend.identity
            click.echo(f"{backend.name}: {backend.description}; platform version "
                       f"{facts['platform_version']}, PJRT C API {facts['pjrt_c_api']}, "
                       f"XLA options: {facts['xla_options']}; found as {facts['source']}")
            continue
        try:
            client = pjrt.client(backend.platform)
        except HlogenError:
            click.echo(f"{backend.name}: not available here: {backend.description}")
            continue
        found = client.local_devices()
        if backend.platform == "cpu":  # XLA CPU's devices are not cores: say so
            cores = backends.cores()
            click.echo(f"{backend.name}: {len(found)} virtual devices (ids {found[0].id}-"
                       f"{found[-1].id}, {client.platform} {client.platform_version}) that "
                       f"share this machine's {cores} core{'s' * (cores != 1)}: XLA CPU runs "
                       f"one replica per device (HLOGEN_CPU_DEVICES sets how many it starts; "
                       f"run --replicas N starts at least N)")
            continue
        for d in found:
            click.echo(f"{backend.name}: {d.device_kind} (id {d.id}, {client.platform} "
                       f"{client.platform_version})")
    for name, why in backends.UNAVAILABLE.items():
        click.echo(f"{name}: not available: {why}")


def _refusals(backend) -> str:
    """What the declaration refuses, in words: the ops always, then those in some forms."""
    short = {when: sorted(name.split(".", 1)[-1] for name, r in backend.refuses.items()
                          if (r.when is None) == when) for when in (True, False)}
    return (f"it does not run {', '.join(short[True])}, nor some forms of "
            f"{', '.join(short[False])}")
