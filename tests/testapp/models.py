import uuid
from decimal import Decimal

from django.conf import settings
from django.contrib.auth.validators import ASCIIUsernameValidator, UnicodeUsernameValidator
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models


class Note(models.Model):
    """A note that belongs to one user: rows are filtered per user."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notes"
    )
    title = models.CharField(max_length=100, help_text="A short title.")
    body = models.TextField(blank=True)
    priority = models.CharField(
        max_length=10, choices=[("low", "Low"), ("high", "High")], default="low"
    )

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return self.title


class Tag(models.Model):
    """A target for the specimen's many-to-many field, with a string primary key."""

    slug = models.SlugField(primary_key=True)


class Ticket(models.Model):
    """A row keyed by a UUID, as many projects key what they show in their admin."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    title = models.CharField(max_length=100)
    done = models.BooleanField(default=False)

    class Meta:
        ordering = ["title"]

    def __str__(self) -> str:
        return self.title


class Specimen(models.Model):
    """Every model field type Django ships (but ImageField, which needs Pillow), with the
    validators and null/blank variants that shape a generated schema."""

    char = models.CharField(max_length=50)
    char_null = models.CharField(max_length=50, null=True, blank=True)
    char_choice = models.CharField(
        max_length=10, choices=[("new", "New"), ("paid", "Paid")], default="new"
    )
    text = models.TextField(blank=True)
    slug = models.SlugField(blank=True)
    unicode_slug = models.SlugField(allow_unicode=True, blank=True)
    email = models.EmailField(blank=True)
    url = models.URLField(blank=True)
    ip = models.GenericIPAddressField(null=True, blank=True)
    ipv4 = models.GenericIPAddressField(protocol="IPv4", null=True, blank=True)
    uuid = models.UUIDField(null=True, blank=True)
    small = models.SmallIntegerField(default=0)
    integer = models.IntegerField(default=0)
    big = models.BigIntegerField(default=0)
    positive_small = models.PositiveSmallIntegerField(default=0)
    positive = models.PositiveIntegerField(default=0)
    positive_big = models.PositiveBigIntegerField(default=0)
    int_choice = models.IntegerField(choices=[(1, "One"), (2, "Two")], null=True, blank=True)
    floating = models.FloatField(null=True, blank=True)
    price = models.DecimalField(max_digits=8, decimal_places=2, default=0)
    rate = models.DecimalField(max_digits=5, decimal_places=4, null=True, blank=True)
    whole = models.DecimalField(max_digits=6, decimal_places=0, null=True, blank=True)
    flag = models.BooleanField(default=False)
    maybe = models.BooleanField(null=True, blank=True)
    day = models.DateField(null=True, blank=True)
    moment = models.DateTimeField(null=True, blank=True)
    clock = models.TimeField(null=True, blank=True)
    duration = models.DurationField(null=True, blank=True)
    binary = models.BinaryField(null=True, blank=True)
    upload = models.FileField(upload_to="specimens/", blank=True)
    path = models.FilePathField(path="/tmp", blank=True)
    data = models.JSONField(null=True, blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    twin = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    tags = models.ManyToManyField(Tag, blank=True)
    code = models.CharField(
        max_length=12,
        blank=True,
        validators=[
            RegexValidator(r"\A[A-Z]{2}-\d{4}\Z"),
            RegexValidator(r"(?i)^x", inverse_match=True),
        ],
    )
    username_like = models.CharField(
        max_length=150, blank=True, validators=[UnicodeUsernameValidator()]
    )
    ascii_name = models.CharField(max_length=150, blank=True, validators=[ASCIIUsernameValidator()])
    # Named groups and an escaped "-": translated word for word, Python's re refuses the
    # (?<year>...) spelling and ECMA-262's u mode refuses \-.
    period = models.CharField(
        max_length=7,
        blank=True,
        validators=[RegexValidator(r"\A(?P<year>\d{4})\-(?P<month>\d{2})\Z")],
    )
    bounded = models.IntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(99)]
    )
    discount = models.DecimalField(
        max_digits=5,
        decimal_places=2,
        default=0,
        validators=[MinValueValidator(Decimal("0")), MaxValueValidator(Decimal("50.5"))],
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]
