"""python manage.py import_transcript PATH [--format claude-code|anthropic|openai] [--org NAME] [--json]

The same import as ``POST /api/v1/imports`` (the upload stored, then its job), run here
instead of on a worker: importing a file again writes only what it gained since.
"""

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from contextops.errors import DomainError
from contextops.models import Organization
from frames.conversation.importing.executing import import_execute
from frames.conversation.importing.receiving import API_FORMATS, UploadFile, import_receive
from frames.conversation.models import Import
from frames.conversation.readers import FORMATS, file_text, storable, subagent_files

# The readers' names of the formats (this command's --format) -> the API's.
API_NAMES = {reader: api for api, reader in API_FORMATS.items()}


class Command(BaseCommand):
    help = "Import a Claude Code, Anthropic Messages or OpenAI chat transcript as a session."

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path)
        parser.add_argument(
            "--format", choices=FORMATS, default=None, help="default: guessed from the file"
        )
        parser.add_argument(
            "--org", default="", help="organization name (default: the only one, else required)"
        )
        parser.add_argument("--title", default="")
        parser.add_argument("--context-window", type=int, default=200_000)
        parser.add_argument(
            "--json", action="store_true", help="print a JSON summary of what was imported"
        )

    def handle(
        self,
        *args,
        path: Path,
        format: str | None,
        org: str,
        title: str,
        context_window: int,
        json: bool,
        **options,
    ):
        if not path.is_file():
            raise CommandError(f"No such file: {path}")
        organization = self._organization(org)
        err = self.stderr
        show = not json and sys.stderr.isatty() or options.get("verbosity", 1) > 1

        def progress(done: int, total: int) -> None:
            if show:
                width = 30
                filled = int(width * done / max(1, total))
                err.write(
                    f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} entries", ending=""
                )
                if done == total:
                    err.write("")

        claude_code = format == "claude-code" or (format is None and path.suffix == ".jsonl")
        try:
            received = import_receive(
                organization=organization,
                agent=None,
                file_name=path.name,
                content=storable(file_text(path)),
                format=API_NAMES[format] if format else None,
                final=True,
                subagents=[
                    UploadFile(sub.name, storable(file_text(sub)))
                    for sub in (subagent_files(path) if claude_code else [])
                ],
                title=title or None,
                context_window_tokens=context_window,
                queue=False,
            )
        except DomainError as exc:
            raise CommandError(exc.detail) from None
        except OSError as exc:
            raise CommandError(str(exc)) from None
        job = import_execute(import_id=received.job.pk, progress=progress)
        if job is None or job.status != Import.Status.COMPLETED or job.result is None:
            detail = (job.error or {}).get("detail") if job is not None else None
            raise CommandError(detail or "The import did not complete.")
        report = job.result
        for skipped in report["skipped"]:
            err.write(f"skipped {skipped['reason']}")
        if json:
            self.stdout.write(_dumps(report))
        else:
            unchanged = " (already imported: nothing new)" if report["unchanged"] else ""
            self.stdout.write(
                f"Imported {path.name} as session {report['session_id']}{unchanged}: "
                f"{report['frames']} frames, {report['turns']} turns, "
                f"{report['api_calls']} model calls, {report['tool_calls']} tool calls "
                f"({report['tool_errors']} failed), {report['compactions']} compactions, "
                f"{report['skipped_lines']} lines skipped."
            )

    def _organization(self, name: str) -> Organization:
        if name:
            organization = Organization.objects.filter(name=name).first()
            if organization is None:
                raise CommandError(f"No organization named {name!r}.")
            return organization
        organizations = list(Organization.objects.all()[:2])
        if len(organizations) != 1:
            raise CommandError("Name the organization with --org.")
        return organizations[0]


def _dumps(data) -> str:
    return json.dumps(data, indent=2)
