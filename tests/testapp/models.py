from django.conf import settings
from django.db import models


class Note(models.Model):
    """A note that belongs to one user: rows are filtered per user."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notes")
    title = models.CharField(max_length=100, help_text="A short title.")
    body = models.TextField(blank=True)
    priority = models.CharField(max_length=10, choices=[("low", "Low"), ("high", "High")], default="low")

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return self.title
