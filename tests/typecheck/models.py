"""The models the ``myapp/mcp.py`` of docs/howto/tools.md imports, as small as it needs."""

from django.conf import settings
from django.db import models


class Book(models.Model):
    title = models.CharField(max_length=200)
    isbn = models.CharField(max_length=13)
    copies = models.PositiveIntegerField(default=1)

    def __str__(self) -> str:
        return self.title


class Member(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)

    def __str__(self) -> str:
        return str(self.user)


class Loan(models.Model):
    book = models.ForeignKey(Book, on_delete=models.CASCADE)
    member = models.ForeignKey(Member, on_delete=models.CASCADE)
    due_on = models.DateField()

    def __str__(self) -> str:
        return f"{self.book} until {self.due_on}"
