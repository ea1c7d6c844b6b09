"""What a model's tokens cost, in US dollars per million, edited by admins."""

from django.core.validators import MinValueValidator
from django.db import models

PRICE_FIELDS = (
    "input_per_mtok",
    "output_per_mtok",
    "cache_write_5m_per_mtok",
    "cache_write_1h_per_mtok",
    "cache_read_per_mtok",
)
_NOT_NEGATIVE = [MinValueValidator(0, "A price cannot be negative.")]


class ModelPrice(models.Model):
    """One model's prices per million tokens. A call on a model without a row has no price:
    its cost is unknown (null), never a guess."""

    model = models.CharField(
        max_length=120, unique=True, help_text="As calls name it, e.g. claude-sonnet-4-5"
    )
    provider = models.CharField(max_length=40, blank=True)
    input_per_mtok = models.DecimalField(
        "input", max_digits=10, decimal_places=4, validators=_NOT_NEGATIVE
    )
    output_per_mtok = models.DecimalField(
        "output", max_digits=10, decimal_places=4, validators=_NOT_NEGATIVE
    )
    cache_write_5m_per_mtok = models.DecimalField(
        "cache write (5 minutes)",
        max_digits=10,
        decimal_places=4,
        default=0,
        validators=_NOT_NEGATIVE,
    )
    cache_write_1h_per_mtok = models.DecimalField(
        "cache write (1 hour)", max_digits=10, decimal_places=4, default=0, validators=_NOT_NEGATIVE
    )
    cache_read_per_mtok = models.DecimalField(
        "cache read", max_digits=10, decimal_places=4, default=0, validators=_NOT_NEGATIVE
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["provider", "model"]
        verbose_name = "model price"
        # A negative price would make costs negative: refused by the form and the database.
        constraints = [
            models.CheckConstraint(
                condition=models.Q(**{f"{name}__gte": 0}), name=f"modelprice_{name}_not_negative"
            )
            for name in PRICE_FIELDS
        ]

    def __str__(self) -> str:
        return self.model
