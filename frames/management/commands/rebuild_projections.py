"""Rebuild frames and budgets from the event log, or check that the tables match it.

The log of a session past retention is read back from its archive files in the default
storage (``frames.archive``), then whatever is still in the event table.
"""

from django.core.management.base import BaseCommand, CommandError

from facts.selectors.lookup import fact_timeline_problems
from frames.models import Session
from frames.projections import budget_audit, projection_diff, projections_rebuild


class Command(BaseCommand):
    help = "Rebuild frames and budgets from events alone; with --verify, only report differences."

    def add_arguments(self, parser):
        parser.add_argument(
            "--verify", action="store_true", help="Report differences and change nothing."
        )
        parser.add_argument(
            "--budgets",
            action="store_true",
            help="Also audit every budget sum (allocations and spending); any problem fails.",
        )
        parser.add_argument(
            "--session", action="append", default=[], help="Only this session id (repeatable)."
        )

    def handle(self, *args, verify: bool, budgets: bool, session: list[str], **options):
        sessions = Session.objects.order_by("created_at")
        if session:
            sessions = sessions.filter(pk__in=session)
        checked = differences = unreadable = problems = 0
        for item in sessions.iterator():
            checked += 1
            try:
                found = projection_diff(item)
            except OSError as exc:
                # An archive file the storage cannot give back: the log is incomplete, so
                # nothing is rebuilt from it, and the run fails saying which session.
                differences += 1
                unreadable += 1
                self.stdout.write(f"session {item.pk}: its archived events cannot be read ({exc})")
                continue
            if budgets:
                for problem in budget_audit(item):
                    problems += 1
                    self.stdout.write(f"session {item.pk}: budget: {problem}")
            differences += len(found)
            for difference in found:
                self.stdout.write(f"session {item.pk}: {difference}")
            if found and not verify:
                projections_rebuild(item)
        if problems:
            raise CommandError(f"{problems} budget problem(s) in {checked} session(s).")
        if verify:
            # Facts are no session's projection, but their valid times are checked here too:
            # every chain's intervals ordered, without gap or overlap, open only at the head.
            for problem in fact_timeline_problems():
                differences += 1
                self.stdout.write(problem)
        if budgets:
            self.stdout.write(f"{checked} session(s) audited: every budget sum is exact.")
        if verify:
            if differences:
                raise CommandError(
                    f"{differences} difference(s) between the tables and the event log in {checked} session(s)"
                    " or in the valid times of facts."
                )
            self.stdout.write(
                self.style.SUCCESS(f"{checked} session(s) checked: the tables match the event log.")
            )
        else:
            if unreadable:
                raise CommandError(
                    f"{unreadable} session(s) whose archived events cannot be read were left as they are."
                )
            self.stdout.write(
                self.style.SUCCESS(
                    f"{checked} session(s) rebuilt from the event log ({differences} field(s) corrected)."
                )
            )
