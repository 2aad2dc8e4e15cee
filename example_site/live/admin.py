from __future__ import annotations

from django.contrib import admin

from .models import TaskRun


@admin.register(TaskRun)
class TaskRunAdmin(admin.ModelAdmin):
    list_display = [
        "__str__",
        "tool",
        "status",
        "steps_done",
        "steps_total",
        "started_at",
        "finished_at",
    ]
    list_filter = ["status", "tool"]
    search_fields = ["session_id", "request_id"]
    readonly_fields = [f.name for f in TaskRun._meta.fields]
    date_hierarchy = "started_at"

    def has_add_permission(self, request: object) -> bool:
        return False
