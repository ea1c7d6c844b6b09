"""What model calls cost in US dollars, as plain functions over a price table.

A price is per million tokens. Anthropic's ``input_tokens`` excludes both cache fields and
OpenAI's records arrive the same way (the client subtracts the cached tokens), so a call
costs input at the input price, cache writes at the 5-minute write price (the default
cache lifetime; the usage records do not say which lifetime was asked for), cache reads
at the read price and output at the output price. A model without a price has no cost:
``None``, never a guess.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens."""

    input: Decimal
    output: Decimal
    cache_write_5m: Decimal = Decimal(0)
    cache_write_1h: Decimal = Decimal(0)
    cache_read: Decimal = Decimal(0)


def price_for(model: str, prices: Mapping[str, Price]) -> Price | None:
    """The price of ``model``: its own row, else the longest priced name it extends with a
    dated or tagged suffix (``claude-sonnet-4-5-20250929`` → ``claude-sonnet-4-5``);
    None when nothing matches, including an empty model name."""
    if not model:
        return None
    if model in prices:
        return prices[model]
    stems = [name for name in prices if model.startswith(name + "-")]
    return prices[max(stems, key=len)] if stems else None


def call_cost(
    price: Price | None,
    *,
    input_tokens: int,
    output_tokens: int,
    cache_creation_input_tokens: int = 0,
    cache_read_input_tokens: int = 0,
) -> Decimal | None:
    """What one call (or a sum of calls on one model) cost; None without a price."""
    if price is None:
        return None
    return (
        input_tokens * price.input
        + output_tokens * price.output
        + cache_creation_input_tokens * price.cache_write_5m
        + cache_read_input_tokens * price.cache_read
    ) / MILLION


@dataclass(frozen=True)
class CostTotal:
    """A sum of costs: ``usd`` over the priced calls, and the models that had no price
    (their calls are left out of ``usd``)."""

    usd: Decimal
    unpriced_models: tuple[str, ...] = ()

    @property
    def usd_float(self) -> float:
        return float(round(self.usd, 6))


def cost_total(rows: Iterable[Mapping[str, Any]], prices: Mapping[str, Price]) -> CostTotal:
    """Sum rows of ``{model, input_tokens, output_tokens, cache_creation_input_tokens,
    cache_read_input_tokens}`` (one per model is enough: cost is linear in tokens)."""
    usd = Decimal(0)
    unpriced: set[str] = set()
    for row in rows:
        cost = call_cost(
            price_for(row["model"], prices),
            input_tokens=row["input_tokens"] or 0,
            output_tokens=row["output_tokens"] or 0,
            cache_creation_input_tokens=row["cache_creation_input_tokens"] or 0,
            cache_read_input_tokens=row["cache_read_input_tokens"] or 0,
        )
        if cost is None:
            if (
                (row["input_tokens"] or 0)
                + (row["output_tokens"] or 0)
                + (row["cache_creation_input_tokens"] or 0)
                + (row["cache_read_input_tokens"] or 0)
            ):
                unpriced.add(row["model"] or "")
        else:
            usd += cost
    return CostTotal(usd=usd, unpriced_models=tuple(sorted(unpriced)))


def usd_text(usd: Decimal) -> str:
    """An amount of US dollars as a page shows it: four decimals under a dollar, so a small
    model's cost still reads ($0.0017), two from a dollar up ($1,234.50)."""
    return f"${usd:,.4f}" if -1 < usd < 1 else f"${usd:,.2f}"
