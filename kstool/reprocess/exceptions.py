from kstool.base.errors import BusyError, KstoolError, NotFoundError


class HistoryGoneError(KstoolError):
    """The state as of the start time is no longer kept (checkpoint history or input retention)."""


class PlanOutdatedError(BusyError):
    """The app ran between the plan and its application: plan again."""


class NothingToResumeError(NotFoundError):
    """`reprocess --resume` of an app that has no unfinished reprocess."""


class ReprocessStoppedError(KstoolError):
    """The run after the rollback failed: says where the app stands (it keeps the exit code of the cause)."""

    @classmethod
    def after(cls, cause: KstoolError, plan, where: str) -> "ReprocessStoppedError":
        error = cls(f"reprocess of {plan.app_id!r} stopped: {cause}. {where} (its state and offsets agree): "
                    f"{resume_advice(plan.app_id)}")
        error.exit_code = cause.exit_code
        return error


def resume_advice(app_id: str) -> str:
    return (f"`kstool reprocess --app-id {app_id} --resume` finishes it (the same reprocess again would "
            "start over)")
