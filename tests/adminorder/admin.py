from typing import Any

from django.contrib import admin

from tests.testapp.models import Note


@admin.register(Note)
class NoteAdmin(admin.ModelAdmin):
    actions = ["touch"]

    @admin.action(description="Touch")
    def touch(self, request: Any, queryset: Any) -> None:
        queryset.update(body="touched")
