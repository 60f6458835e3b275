"""``skillrl view``: serve the local web view of a workspace's episodes, skill bank and runs."""

from __future__ import annotations

import click

from skillrl_cli.options import workspace_option


@click.command("view")
@workspace_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on. Anything but loopback requires --token.",
)
@click.option("--port", default=8765, show_default=True, type=int, help="Port to listen on.")
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
    """
    import secrets

    import uvicorn

    from memory import SkillBank
    from skillrl.workspace import resolve_workspace
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
    bank = SkillBank.open(bank_config(workspace, read_only=read_only))
    app = build_app(bank, ViewConfig(read_only=read_only, runs_dir=root / "runs"), security)
    url = f"http://{host}:{port}/"
    if security.access_token:
        url += f"?token={security.access_token}"
    click.echo(f"skillrl view: {url}  (Ctrl-C stops it)")
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning")
    finally:
        bank.close()
