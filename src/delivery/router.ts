import { errorMessage, type Logger } from "../log.js";
import { CHANNELS, type Channel, type DeliveryProvider, type ProviderSpec } from "../messaging/providers.js";
import type { Metrics } from "../observability/metrics.js";
import type { RedisClient } from "../redis/client.js";
import { DeliveryError, type DeliveryState } from "../messaging/provider.js";
import { parseE164 } from "../phone/e164.js";
import { Circuit } from "./circuit.js";
import { destinationKind, type Route, type RouteStore } from "./routes.js";
import type { DeliverySettings } from "./settings.js";
import type { DeliveryStats, Figures, Place } from "./stats.js";
import { orderProviders } from "./strategy.js";

/** Where a message goes, as routes match it. */
export interface Target {
  e164: string;
  /** ISO 3166 alpha-2 ('' or 001 outside any country). */
  country: string;
  /** `<mcc>-<mnc>` when the lookup knows it, else anything else or ''. */
  network: string;
}

/** The providers one message is tried through, in order, and the route that chose them. */
export interface Plan {
  channel: Channel;
  /** The route's destination (`default` when no route matched). */
  route: string;
  country: string;
  providers: DeliveryProvider[];
}

/** A delivery state as insights and metrics count it (docs/routing.md#insights); others are not reports. */
const REPORT_STATUS: Partial<Record<DeliveryState, "delivered" | "undelivered" | "rejected">> = {
  delivered: "delivered",
  failed: "undelivered",
  expired: "undelivered",
  rejected: "rejected",
};

/** A route with only the providers this process knows, and its name in figures and exploring. */
interface CompiledRoute extends Route {
  key: string;
}

/** One channel's routes by kind of destination; `fallback`, its `default` route or declared order. */
interface CompiledTable {
  prefixes: CompiledRoute[];
  networks: Map<string, CompiledRoute>;
  countries: Map<string, CompiledRoute>;
  fallback: CompiledRoute;
}

/** A lasting refusal of one message by a provider that answered (not an error, not a silence). */
function refusedOnly(err: unknown): boolean {
  return err instanceof DeliveryError && !err.retryable && !err.outcomeUnknown;
}

/** How often each process reads the routes and the conversion figures again (besides announcements). */
export const REFRESH_MS = 1_000;

/**
 * Chooses providers for each message from the routes (docs/routing.md): the route table, each
 * `conversion` route's figures and each provider's circuit are kept in the process and read again
 * in the background (every REFRESH_MS, and at once on a route change announced), so choosing costs
 * a send no Redis round trip.
 */
export class Router {
  /** The routes of each channel, as sends look them up (read again every REFRESH_MS). */
  private table = new Map<Channel, CompiledTable>();
  private readonly byName: Map<string, DeliveryProvider>;
  private readonly specs: Map<string, ProviderSpec>;
  private readonly circuits = new Map<string, Circuit>();
  private readonly figures = new Map<string, Map<string, Figures>>();
  /** Per `conversion` route, this process's messages and those that explored, since the last reset. */
  private readonly exploring = new Map<string, { messages: number; explored: number }>();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private refreshing: Promise<void> | undefined;
  /** The read asked for while another was under way, made once that one ends. */
  private again: Promise<void> | undefined;
  private readonly now: () => number;
  private readonly random: () => number;

  constructor(
    readonly providers: readonly DeliveryProvider[],
    private readonly o: {
      store: RouteStore;
      stats: DeliveryStats;
      config: DeliverySettings;
      log: Logger;
      metrics?:
        | Pick<Metrics, "deliverySent" | "deliveryReport" | "deliveryVerified" | "providerAvailable">
        | undefined;
      now?: () => number;
      random?: () => number;
    },
  ) {
    this.now = o.now ?? Date.now;
    this.random = o.random ?? Math.random;
    this.byName = new Map(providers.map((p) => [p.spec.name, p]));
    this.specs = new Map(providers.map((p) => [p.spec.name, p.spec]));
    for (const p of providers) {
      const circuit = new Circuit(
        {
          failures: o.config.PROVIDER_CIRCUIT_FAILURES,
          openMs: o.config.PROVIDER_CIRCUIT_OPEN_SECONDS * 1000,
          now: this.now,
        },
        (open) => {
          o.log[open ? "warn" : "info"](open ? "provider circuit opened" : "provider circuit closed", {
            provider: p.spec.name,
          });
          this.report(p);
        },
      );
      this.circuits.set(p.spec.name, circuit);
    }
  }

  /** A provider by name, or by a name it had before (the back-compat provider's `smpp`, `http`). */
  provider(name: string): DeliveryProvider | undefined {
    return this.byName.get(name) ?? this.providers.find((p) => p.spec.formerNames?.includes(name));
  }

  /** The route `target` follows on `channel`: the most specific that matches, else the channel's providers in order. */
  routeFor(channel: Channel, target: Target): Route {
    return this.compiledFor(channel, target);
  }

  private compiledFor(channel: Channel, target: Target): CompiledRoute {
    const t = this.table.get(channel) ?? this.compile(channel, []);
    // The longest prefix first, then the network, then the country, then `default`.
    for (const r of t.prefixes) if (target.e164.startsWith(r.destination)) return r;
    return t.networks.get(target.network) ?? t.countries.get(target.country) ?? t.fallback;
  }

  /** The routes of `channel` as sends look them up, their providers those this process knows. */
  private compile(channel: Channel, routes: readonly Route[]): CompiledTable {
    const known = (r: Route): CompiledRoute => {
      const keep = r.providers.map((n) => this.byName.has(n));
      return {
        ...r,
        providers: r.providers.filter((_, i) => keep[i]),
        weights: r.weights?.filter((_, i) => keep[i]),
        key: `${channel} ${r.destination}`,
      };
    };
    const mine = routes.filter((r) => r.channel === channel).map(known);
    const of = (kind: string) => mine.filter((r) => destinationKind(r.destination) === kind);
    const names = this.providers.filter((p) => p.spec.channel === channel).map((p) => p.spec.name);
    return {
      prefixes: of("prefix").sort((a, b) => b.destination.length - a.destination.length),
      networks: new Map(of("network").map((r) => [r.destination, r])),
      countries: new Map(of("country").map((r) => [r.destination, r])),
      fallback:
        of("default")[0] ??
        known({ channel, destination: "default", providers: names, strategy: "failover" }),
    };
  }

  /**
   * The providers to try for a message to `target`, in order; with `avoid` (the provider of the
   * attempt before), another provider of the route goes first when one is available.
   */
  plan(channel: Channel, target: Target, avoid?: string): Plan {
    const route = this.compiledFor(channel, target);
    let order = orderProviders(route, {
      country: target.country,
      specs: this.specs,
      figures: this.figures.get(route.key),
      minSends: this.o.config.ROUTE_MIN_SENDS,
      exploreShare: this.o.config.ROUTE_EXPLORE_SHARE,
      random: this.random,
      explore: () => this.explores(route.key),
    });
    if (avoid !== undefined && order.some((n) => n !== avoid && this.isAvailable(n))) {
      order = [...order.filter((n) => n !== avoid), ...order.filter((n) => n === avoid)];
    }
    return {
      channel,
      route: route.destination,
      country: target.country,
      providers: order.map((n) => this.byName.get(n) as DeliveryProvider),
    };
  }

  /**
   * Whether the next message of a `conversion` route explores: whenever the route's explored
   * messages would otherwise fall below ROUTE_EXPLORE_SHARE of its messages, so that share is a
   * floor (docs/routing.md#strategies), spread evenly over the messages. Counted per process, afresh every 1,000.
   */
  private explores(route: string): boolean {
    const e = this.exploring.get(route) ?? { messages: 0, explored: 0 };
    if (e.messages >= 1_000) {
      e.messages = 0;
      e.explored = 0;
    }
    e.messages += 1;
    const explores = e.explored < this.o.config.ROUTE_EXPLORE_SHARE * e.messages;
    if (explores) e.explored += 1;
    this.exploring.set(route, e);
    return explores;
  }

  /** Whether `name` may be tried now: its bind is up (SMPP) and its circuit lets it. */
  isAvailable(name: string): boolean {
    const p = this.byName.get(name);
    return p !== undefined && p.available?.() !== false && this.circuits.get(name)?.isAvailable() !== false;
  }

  /** Takes a place to send through `p` now (a half-open circuit gives one); false: skip it. */
  take(p: DeliveryProvider): boolean {
    if (p.available?.() === false) return false;
    return this.circuits.get(p.spec.name)?.take() ?? true;
  }

  /** Gives back the place `take` gave for a message that never went out (its call was cut first). */
  release(p: DeliveryProvider): void {
    this.circuits.get(p.spec.name)?.release();
  }

  /**
   * The outcome of one submit tried: `true` when accepted, else what it failed with. The circuit
   * counts only failures that say the provider is unwell (an error, no answer, a 5xx, a bind
   * down): a provider that refuses one message has answered, and a caller sending numbers a
   * provider refuses must not open its circuit for every tenant (docs/routing.md#availability).
   * Then the metric and, unless `counted` is false (a session's code, whose conversion is not
   * followed, would only lower the figures), the counters. Never throws.
   */
  submitted(p: DeliveryProvider, plan: Plan, result: unknown, counted = true): void {
    const accepted = result === true;
    const circuit = this.circuits.get(p.spec.name);
    if (accepted || refusedOnly(result)) circuit?.succeeded();
    else circuit?.failed();
    this.o.metrics?.deliverySent(plan.channel, p.spec.name, plan.country);
    if (!counted) return;
    const cost = Math.round((p.spec.cost[plan.country] ?? p.spec.cost.default ?? 0) * 1_000_000);
    this.count(
      { channel: plan.channel, provider: p.spec.name, country: plan.country, route: plan.route },
      accepted ? { sent: 1, accepted: 1, cost } : { sent: 1 },
      accepted ? { s: 1, a: 1 } : { s: 1 },
    );
  }

  /** A code checked right: counted for the provider and route that carried it (`carried`: `<provider> <route>`). */
  verified(channel: Channel, carried: string, e164: string): void {
    const [provider = "", route = "default"] = carried.split(" ");
    if (!this.byName.has(provider)) return;
    const country = parseE164(e164)?.countryCode ?? "";
    this.o.metrics?.deliveryVerified(channel, provider, country);
    this.count({ channel, provider, country, route }, { verified: 1 }, { v: 1 });
  }

  /**
   * A delivery report of `provider` (an SMPP receipt, an http provider's report): counted by status;
   * an undelivered or rejected message no longer counts in the cost.
   */
  reported(channel: Channel, provider: string, country: string, route: string, state: DeliveryState): void {
    const status = REPORT_STATUS[state];
    const p = this.provider(provider);
    if (status === undefined || p === undefined) return;
    this.o.metrics?.deliveryReport(channel, p.spec.name, country, status);
    const cost =
      status === "delivered"
        ? 0
        : -Math.round((p.spec.cost[country] ?? p.spec.cost.default ?? 0) * 1_000_000);
    this.count({ channel, provider: p.spec.name, country, route }, { [status]: 1, cost });
  }

  /** Adds to the delivery counters: in the process, written by the next refresh (DeliveryStats.flush). */
  count(
    at: Place,
    hourly: Parameters<DeliveryStats["add"]>[1],
    conversion: Parameters<DeliveryStats["add"]>[2] = {},
  ): void {
    this.o.stats.add(at, hourly, conversion);
  }

  /** Writes the counts added so far (a lost write is logged, never thrown). */
  private async flush(): Promise<void> {
    await this.o.stats.flush().catch((err: unknown) => {
      this.o.log.warn("delivery counters not written", { error: errorMessage(err) });
    });
  }

  /**
   * Writes this process's counts, then reads the routes and the `conversion` figures now (what the
   * background does every REFRESH_MS). Asked while a read is under way, it reads once more after
   * it: that read may predate a change just announced.
   */
  async refresh(): Promise<void> {
    if (this.refreshing === undefined) {
      this.refreshing = this.read().finally(() => {
        this.refreshing = undefined;
      });
      return this.refreshing;
    }
    this.again ??= this.refreshing
      .catch(() => undefined)
      .then(() => {
        this.again = undefined;
        return this.refresh();
      });
    return this.again;
  }

  private async read(): Promise<void> {
    await this.flush();
    const routes = await this.o.store.list();
    this.table = new Map(CHANNELS.map((c) => [c, this.compile(c, routes)]));
    const reads = routes
      .filter((r) => r.strategy === "conversion")
      .map(async (r) => {
        this.figures.set(
          `${r.channel} ${r.destination}`,
          await this.o.stats.figures(r.channel, r.destination),
        );
      });
    await Promise.all(reads);
    for (const p of this.providers) this.report(p);
  }

  private report(p: DeliveryProvider): void {
    const open = this.circuits.get(p.spec.name)?.isOpen() === true;
    this.o.metrics?.providerAvailable(p.spec.channel, p.spec.name, !open && p.available?.() !== false);
  }

  /**
   * Reads everything once, then every REFRESH_MS in the background. When Redis does not answer at
   * start, messages follow the declared order (no route) until the first read that succeeds.
   */
  async start(): Promise<void> {
    await this.refresh().catch((err: unknown) => {
      this.o.log.warn("routes not read at start; the declared order until they are", {
        error: errorMessage(err),
      });
    });
    const tick = () => {
      if (this.stopped) return;
      this.timer = setTimeout(() => {
        this.refresh()
          .catch((err: unknown) => {
            this.o.log.warn("routes not read again; the last ones stay", { error: errorMessage(err) });
          })
          .finally(tick);
      }, REFRESH_MS);
      this.timer.unref();
    };
    tick();
  }

  /** Listens for route changes on `subscriber`, reading them at once. */
  async watch(subscriber: RedisClient, channel: string): Promise<() => Promise<void>> {
    const onMessage = (c: string) => {
      if (c === channel) void this.refresh().catch(() => undefined);
    };
    subscriber.on("message", onMessage);
    await subscriber.subscribe(channel);
    return async () => {
      subscriber.off("message", onMessage);
      await subscriber.unsubscribe(channel).catch(() => undefined);
    };
  }

  /** Stops reading, and writes the counts not yet written unless `flush` is false (Redis does not answer). */
  async stop(flush = true): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    if (flush) await this.flush();
  }
}
