import { costOf, type ProviderSpec } from "../messaging/providers.js";
import type { Route } from "./routes.js";
import type { Figures } from "./stats.js";

/** What a strategy reads besides the route (docs/routing.md#strategies). */
export interface StrategyInputs {
  country: string;
  specs: ReadonlyMap<string, ProviderSpec>;
  /** The `conversion` figures of the route's destination, by provider (absent: none yet). */
  figures: ReadonlyMap<string, Figures> | undefined;
  minSends: number;
  exploreShare: number;
  random: () => number;
  /**
   * Whether this message explores (goes first to another provider than the best), kept by the
   * caller per route so that the share is a floor; absent: with probability `exploreShare`.
   */
  explore?: (() => boolean) | undefined;
}

/**
 * The route's providers in the order they are tried: the first is the strategy's choice and each
 * next one the choice after a failure (declared order, next by weight, next cheapest, next by
 * conversion). Availability is judged when each is tried.
 */
export function orderProviders(
  route: Pick<Route, "providers" | "strategy" | "weights">,
  s: StrategyInputs,
): string[] {
  const names = route.providers;
  switch (route.strategy) {
    case "failover":
      return [...names];
    case "weighted":
      return weightedOrder(names, route.weights ?? names.map(() => 1), s.random);
    case "cost": {
      const cost = (n: string) => {
        const spec = s.specs.get(n);
        return spec === undefined ? Number.POSITIVE_INFINITY : costOf(spec, s.country);
      };
      // A stable sort: equal costs keep the declared order.
      return [...names].sort((a, b) => cost(a) - cost(b));
    }
    case "conversion":
      return conversionOrder(names, s);
  }
}

/** Draws without replacement, each draw by weight among those left (a weight 0 comes last). */
function weightedOrder(names: readonly string[], weights: readonly number[], random: () => number): string[] {
  const left = names.map((name, i) => ({ name, weight: weights[i] ?? 0 }));
  const order: string[] = [];
  while (left.length > 0) {
    const total = left.reduce((sum, p) => sum + p.weight, 0);
    let i = 0;
    if (total > 0) {
      let u = random() * total;
      while (i < left.length - 1 && u >= (left[i]?.weight ?? 0)) u -= left[i++]?.weight ?? 0;
    }
    order.push(...left.splice(i, 1).map((p) => p.name));
  }
  return order;
}

/**
 * Best conversion first (verified / accepted over the window; one with fewer than `minSends` sends
 * counts as best, so a new provider is measured); when the message explores (see `explore`), one of the others
 * goes first, drawn evenly, so their figures stay fresh.
 */
function conversionOrder(names: readonly string[], s: StrategyInputs): string[] {
  const score = (n: string) => {
    const f = s.figures?.get(n);
    if (f === undefined || f.sent < s.minSends) return Number.POSITIVE_INFINITY;
    return f.accepted === 0 ? 0 : f.verified / f.accepted;
  };
  const ranked = [...names].sort((a, b) => {
    const x = score(a);
    const y = score(b);
    return x === y ? 0 : x > y ? -1 : 1;
  });
  if (ranked.length < 2) return ranked;
  const explores = s.explore === undefined ? s.random() < s.exploreShare : s.explore();
  if (!explores) return ranked;
  const others = ranked.slice(1);
  const pick = others[Math.min(others.length - 1, Math.floor(s.random() * others.length))] as string;
  return [pick, ...ranked.filter((n) => n !== pick)];
}
