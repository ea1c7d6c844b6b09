"""python manage.py import_transcript PATH [--format claude-code|anthropic|openai] [--org NAME] [--json]"""

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from contextops.errors import DomainError
from contextops.models import Organization
from frames.conversation.importing import transcript_import
from frames.conversation.readers import FORMATS, TranscriptError, read_transcript


class Command(BaseCommand):
    help = "Import a Claude Code, Anthropic Messages or OpenAI chat transcript as a new session."

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
        try:
            transcript = read_transcript(path, format)
        except (TranscriptError, OSError) as exc:
            raise CommandError(str(exc)) from None
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

        try:
            report = transcript_import(
                organization=organization,
                transcript=transcript,
                title=title,
                context_window_tokens=context_window,
                progress=progress,
            )
        except DomainError as exc:
            raise CommandError(exc.detail) from None
        for _line, reason in report.skipped:
            err.write(f"skipped {reason}")
        if json:
            self.stdout.write(_dumps(report.as_dict()))
        else:
            self.stdout.write(
                f"Imported {path.name} as session {report.session.pk}: {report.frames} frames, {report.turns} turns, "
                f"{report.api_calls} model calls, {report.tool_calls} tool calls ({report.tool_errors} failed), "
                f"{report.compactions} compactions, {len(report.skipped)} lines skipped."
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
