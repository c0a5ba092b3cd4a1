import type { Channel, ProviderSpec } from "../messaging/providers.js";
import { CHANNELS } from "../messaging/providers.js";
import type { RedisClient } from "../redis/client.js";
import { announceChange } from "../redis/watched-cache.js";
import type { DeliveryKeys } from "./keys.js";

export const STRATEGIES = ["failover", "weighted", "cost", "conversion"] as const;
export type Strategy = (typeof STRATEGIES)[number];

/** One route (docs/routing.md#routes), as `routes list` prints it. */
export interface Route {
  channel: Channel;
  /** `default`, a country (`FR`), a network (`208-01`) or a prefix (`+3361`). */
  destination: string;
  providers: string[];
  strategy: Strategy;
  /** With `weighted`: one per provider, summing to 100. */
  weights?: number[] | undefined;
}

export type DestinationKind = "default" | "country" | "network" | "prefix";

/** The kind of a route destination; undefined when it is none. */
export function destinationKind(d: string): DestinationKind | undefined {
  if (d === "default") return "default";
  if (/^[A-Z]{2}$/.test(d)) return "country";
  if (/^\d{3}-\d{2,3}$/.test(d)) return "network";
  if (/^\+[1-9]\d{0,14}$/.test(d)) return "prefix";
  return undefined;
}

/**
 * What is wrong with `route` against the process's providers, in one line; undefined when nothing.
 * The rules of docs/routing.md#routes: known providers of the route's channel, each once, a
 * well-formed destination, weights only with `weighted`, one per provider, summing to 100.
 */
export function routeProblem(
  route: Route,
  providers: readonly Pick<ProviderSpec, "name" | "channel">[],
): string | undefined {
  if (!(CHANNELS as readonly string[]).includes(route.channel)) {
    return `--channel must be one of ${CHANNELS.join(", ")}`;
  }
  if (destinationKind(route.destination) === undefined) {
    return "--destination must be default, a country (FR), a network (208-01) or a prefix (+3361)";
  }
  if (route.providers.length === 0) return "--providers must name at least one provider";
  const seen = new Set<string>();
  for (const name of route.providers) {
    const p = providers.find((q) => q.name === name);
    if (p === undefined) return `--providers: ${name} is not a provider of DELIVERY_PROVIDERS`;
    if (p.channel !== route.channel) return `--providers: ${name} serves ${p.channel}, not ${route.channel}`;
    if (seen.has(name)) return `--providers: ${name} is named twice`;
    seen.add(name);
  }
  if (!(STRATEGIES as readonly string[]).includes(route.strategy)) {
    return `--strategy must be one of ${STRATEGIES.join(", ")}`;
  }
  if (route.strategy !== "weighted") {
    return route.weights === undefined ? undefined : "--weights go with --strategy weighted only";
  }
  const w = route.weights;
  if (w === undefined) return "--strategy weighted needs --weights, one per provider";
  if (w.length !== route.providers.length) {
    return `--weights: ${w.length} weights for ${route.providers.length} providers`;
  }
  if (w.some((x) => !Number.isInteger(x) || x < 0 || x > 100))
    return "--weights must be whole numbers from 0 to 100";
  const sum = w.reduce((a, b) => a + b, 0);
  return sum === 100 ? undefined : `--weights must sum to 100 (they sum to ${sum})`;
}

const field = (channel: string, destination: string) => `${channel} ${destination}`;

/** The routes kept in Redis; every change is announced, so each process obeys it within a second. */
export class RouteStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: DeliveryKeys,
  ) {}

  /** Every route, by channel then destination. */
  async list(channel?: string): Promise<Route[]> {
    const all = await this.redis.hgetall(this.keys.routes());
    const routes: Route[] = [];
    for (const value of Object.values(all)) {
      const route = readRoute(value);
      if (route !== undefined && (channel === undefined || route.channel === channel)) routes.push(route);
    }
    const order = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
    return routes.sort((a, b) =>
      a.channel === b.channel ? order(a.destination, b.destination) : order(a.channel, b.channel),
    );
  }

  /** Writes `route` (checked by the caller) in place of the one of its destination. */
  async set(route: Route): Promise<void> {
    const value: Route = {
      channel: route.channel,
      destination: route.destination,
      providers: route.providers,
      strategy: route.strategy,
      ...(route.weights === undefined ? {} : { weights: route.weights }),
    };
    await this.redis.hset(this.keys.routes(), field(route.channel, route.destination), JSON.stringify(value));
    await announceChange(this.redis, this.keys.routeChanges(), "routes");
  }

  /** Removes the route of a destination; true when there was one. */
  async remove(channel: string, destination: string): Promise<boolean> {
    const removed = (await this.redis.hdel(this.keys.routes(), field(channel, destination))) > 0;
    if (removed) await announceChange(this.redis, this.keys.routeChanges(), "routes");
    return removed;
  }
}

function readRoute(value: string): Route | undefined {
  try {
    const r = JSON.parse(value) as Route;
    return typeof r.channel === "string" && Array.isArray(r.providers) ? r : undefined;
  } catch {
    return undefined;
  }
}
