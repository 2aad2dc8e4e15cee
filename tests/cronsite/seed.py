"""Two members with random usernames who sign in by email; one check each."""

from django.contrib.auth import get_user_model

PASSWORD = "correct horse"
ANN = "ann@example.com"
BOB = "bob@example.com"


def seed() -> None:
    from tests.cronsite.monitor.models import Check  # only inside the project's own process

    User = get_user_model()
    for username, email in (("u-7f3a", ANN), ("u-91c2", BOB)):
        user = User.objects.create_user(username, email, PASSWORD)
        Check.objects.create(name=f"backup of {email}", owner=user)
