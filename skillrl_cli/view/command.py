"""``skillrl view``: serve the local web view of a workspace's episodes, skill bank and runs."""

from __future__ import annotations

import dataclasses
import socket

import click

from skillrl_cli.options import workspace_option


def _listen(host: str, port: int) -> socket.socket:
    """Return a socket bound to ``host``:``port``; refuse in one line when it cannot be had.

    The command binds it itself (as uvicorn would) so that a port in use or an unknown host is
    one line before the bank opens, and so that the printed URL has the port taken (``0``: any
    free one).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise click.ClickException(
            f"cannot listen on {host} port {port}: {error.strerror or error}"
        ) from error
    return sock


@click.command("view")
@workspace_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on. Anything but loopback requires --token. The view answers "
    "to localhost, 127.0.0.1, [::1] and this address (bound to 0.0.0.0 with --token: to any "
    "name).",
)
@click.option(
    "--port",
    default=8765,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on (0: any free one; the printed URL has the port taken).",
)
@click.option(
    "--token",
    default=None,
    help="Access token for a non-loopback --host; `--token auto` makes one. Open the printed "
    "URL (it carries ?token=) once; the browser then keeps it in a cookie.",
)
@click.option(
    "--read-only",
    is_flag=True,
    help="Show everything, change nothing: edit, retire, restore and revert are hidden "
    "and refused.",
)
def view(workspace: str | None, host: str, port: int, token: str | None, read_only: bool) -> None:
    """Open a local web view: episodes turn by turn, GRPO groups, the skill bank, runs.

    It works offline (no asset from the internet) and binds to 127.0.0.1 unless told
    otherwise. Edits go through the same bank calls as `skillrl skills edit`, so they appear
    in `skillrl skills history`. Every text from the bank, pages and model output is escaped.
    The workspace must exist: the view creates nothing.
    """
    import secrets

    import uvicorn

    from memory import SkillBank
    from skillrl.workspace import WORKSPACE_ENV_VAR, resolve_workspace
    from skillrl_cli.bank_access import bank_config
    from skillrl_cli.view.app import ViewConfig, build_app
    from skillrl_cli.view.security import UnsafeBindError, security_for_bind

    if token == "auto":
        token = secrets.token_urlsafe(24)
    try:
        security = security_for_bind(host, token)
    except UnsafeBindError as error:
        raise click.UsageError(str(error)) from error
    root = resolve_workspace(workspace)
    if not root.is_dir():  # opening the bank would create one there and show it empty
        raise click.BadParameter(
            f"no workspace folder at {root}: give the one your other commands used "
            "(the view creates nothing)",
            param_hint=f"'--workspace' / ${WORKSPACE_ENV_VAR}",
        )
    config = bank_config(workspace, read_only=read_only)
    if config.database_url is None and not (config.workspace / "bank.sqlite").exists():
        # A workspace whose bank was never created (its runs may be there): shown read-only, so
        # the view writes no bank into it; there is nothing to edit yet.
        config = dataclasses.replace(config, read_only=True)
        read_only = True
    sock = _listen(host, port)
    try:
        bank = SkillBank.open(config)
    except BaseException:
        sock.close()
        raise
    app = build_app(bank, ViewConfig(read_only=read_only, runs_dir=root / "runs"), security)
    shown_host = f"[{host}]" if ":" in host else host
    url = f"http://{shown_host}:{sock.getsockname()[1]}/"
    if security.access_token:
        url += f"?token={security.access_token}"
    click.echo(f"skillrl view: {url}  (Ctrl-C stops it)")
    try:
        uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
    finally:
        sock.close()
        bank.close()
