/**
 * `npm run routing:sim`: each route strategy against three fake SMS providers and simulated users,
 * through the service's own Router (src/delivery/router.ts) on a real Redis, with a simulated clock
 * so that hours of traffic run in seconds; prints the table of docs/routing.md#measured.
 *
 * REDIS_URL: the Redis to count in (keys under a prefix of their own, removed afterwards); unset: a
 * redis-server of its own from PATH. The run is seeded: the same options print the same table.
 */
import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Command, InvalidArgumentError } from "commander";
import { Redis } from "ioredis";
import { z } from "zod";
import { DeliveryKeys } from "../src/delivery/keys.js";
import { Router, type Plan, type Target } from "../src/delivery/router.js";
import { RouteStore, type Route } from "../src/delivery/routes.js";
import { deliverySettings, type DeliverySettings } from "../src/delivery/settings.js";
import { DeliveryStats } from "../src/delivery/stats.js";
import { silentLogger } from "../src/log.js";
import { DeliveryError, type OutgoingSms, type SentSms } from "../src/messaging/provider.js";
import type { DeliveryProvider } from "../src/messaging/providers.js";
import { Keys, scanKeys } from "../src/redis/client.js";
import { startRedis } from "../test/support/redis.js";

export type Country = "FR" | "DE";
export type Fake = "a" | "b" | "c";

/** The fakes' price per message and true delivery rates (before B's loss and A's outage). */
export const FAKES: readonly { name: Fake; cost: number; delivery: Record<Country, number> }[] = [
  { name: "a", cost: 0.035, delivery: { FR: 0.95, DE: 0.97 } },
  { name: "b", cost: 0.03, delivery: { FR: 0.99, DE: 0.93 } },
  { name: "c", cost: 0.045, delivery: { FR: 0.88, DE: 0.95 } },
];
/** The share of FR messages B accepts and never delivers, from `lossFrom` on. */
export const B_FR_LOSS = 0.4;
/** Users who ask for a code and never enter one, whatever arrives (the same for every strategy). */
export const NO_SHOW = 0.1;
/** A user whose code has not arrived asks for another, once, this long after the first. */
export const RETRY_AFTER_S = 60;
/** The fakes' timeout_ms: a send to A while it does not answer takes this long before the next provider. */
const TIMEOUT_MS = 5_000;
/** The routes' strategies, as `ringfence routes set` takes them, and the oracle. */
export const STRATEGIES = ["failover", "weighted", "cost", "conversion", "oracle"] as const;
export type SimStrategy = (typeof STRATEGIES)[number];

/** A fixed start (a Monday, 08:00 UTC), so slices and hours fall alike in every run. */
const T0 = Date.UTC(2025, 0, 6, 8);

export interface Scenario {
  seed: number;
  /** Seconds during which users arrive (the last ones are then given time to finish). */
  seconds: number;
  usersPerSecond: number;
  /** When B starts losing B_FR_LOSS of FR messages, in seconds from the start. */
  lossFrom: number;
  /** A's outage: it refuses (503) from `from`, does not answer from `timeoutsFrom`, is back at `to`. */
  outage: { from: number; timeoutsFrom: number; to: number };
}

/** `hours` of traffic: B's loss starts after a sixth of it, A's 20-minute outage at half-time. */
export function scenario(hours: number, o: { seed?: number; usersPerSecond?: number } = {}): Scenario {
  const seconds = Math.round(hours * 3_600);
  const from = Math.round(seconds / 2);
  return {
    seed: o.seed ?? 1,
    seconds,
    usersPerSecond: o.usersPerSecond ?? 2,
    lossFrom: Math.round(seconds / 6),
    outage: { from, timeoutsFrom: from + 600, to: from + 1_200 },
  };
}

/** What one strategy gave over the scenario. */
export interface Outcome {
  strategy: SimStrategy;
  users: number;
  verified: number;
  /** Users who asked for a second code (the first never arrived). */
  retried: number;
  /** Messages accepted by a provider, and what they cost. */
  messages: number;
  cost: number;
  outage: {
    /** Codes asked for during the outage that never left or went to A and never arrived. */
    lost: number;
    /** Messages A refused or did not answer during the outage that another provider carried. */
    failedOver: number;
  };
  /** Shares of first codes, FR, from 15 minutes after B's loss started to the end, the outage aside. */
  frShares: Record<Fake, number>;
  offB: { before: number; minutes: number | undefined };
  backToA: { before: number; minutes: number | undefined };
}

/** Runs every strategy of STRATEGIES over `s`, side by side, on the Redis at `redisUrl`. */
export async function simulateAll(redisUrl: string, s: Scenario): Promise<Outcome[]> {
  const users = makeUsers(s);
  return Promise.all(STRATEGIES.map((strategy) => simulate(redisUrl, s, strategy, users)));
}

/** A simulated user: when the first code is asked for, where, and how it behaves. */
interface User {
  id: number;
  at: number;
  country: Country;
  e164: string;
  noShow: boolean;
  /** Seconds a delivered message takes to arrive, by attempt. */
  latency: [number, number];
  /** Seconds from a code's arrival to its entry. */
  think: number;
}

function makeUsers(s: Scenario): User[] {
  const arrivals = mulberry32(s.seed);
  const users: User[] = [];
  for (let t = 0; t < s.seconds; t++) {
    for (let k = poisson(s.usersPerSecond, arrivals); k > 0; k--) {
      const id = users.length;
      const country: Country = uniform(s.seed, id, 0) < 0.5 ? "FR" : "DE";
      const digits = String(id).padStart(8, "0");
      users.push({
        id,
        at: t,
        country,
        e164: country === "FR" ? `+336${digits}` : `+49151${digits}`,
        noShow: uniform(s.seed, id, 1) < NO_SHOW,
        latency: [3 + Math.floor(uniform(s.seed, id, 2) * 18), 3 + Math.floor(uniform(s.seed, id, 3) * 18)],
        think: 5 + Math.floor(uniform(s.seed, id, 4) * 36),
      });
    }
  }
  return users;
}

/** The world the fakes live in: the simulated clock, the scenario's truth and the events due. */
class World {
  second = 0;
  private readonly events = new Map<number, (() => Promise<void>)[]>();

  constructor(readonly s: Scenario) {}

  now = (): number => T0 + this.second * 1_000;

  at(second: number, event: () => Promise<void>): void {
    const list = this.events.get(second) ?? [];
    list.push(event);
    this.events.set(second, list);
  }

  due(second: number): (() => Promise<void>)[] {
    const list = this.events.get(second) ?? [];
    this.events.delete(second);
    return list;
  }

  /** How A fails at the current second, or undefined when it answers. */
  down(name: Fake): "refuse" | "timeout" | undefined {
    const { from, timeoutsFrom, to } = this.s.outage;
    if (name !== "a" || this.second < from || this.second >= to) return undefined;
    return this.second < timeoutsFrom ? "refuse" : "timeout";
  }

  /** The true chance that a message `name` accepts now reaches a user in `country`. */
  rate(name: Fake, country: Country): number {
    if (this.down(name) !== undefined) return 0;
    const base = FAKES.find((f) => f.name === name)?.delivery[country] ?? 0;
    return name === "b" && country === "FR" && this.second >= this.s.lossFrom ? base * (1 - B_FR_LOSS) : base;
  }

  inOutage(): boolean {
    return this.second >= this.s.outage.from && this.second < this.s.outage.to;
  }
}

/**
 * A fake provider in the process: refuses or does not answer while down; otherwise accepts, and
 * the message reaches its user with the provider's true rate for the country, and is silently lost
 * otherwise (`fate` is told which). The draw for a message is the same whichever strategy sent it.
 */
function fakeProvider(
  name: Fake,
  world: World,
  fate: (msg: OutgoingSms, delivered: boolean) => void,
): DeliveryProvider {
  const cost = FAKES.find((f) => f.name === name)?.cost ?? 0;
  return {
    name,
    longestSendMs: TIMEOUT_MS,
    spec: {
      name,
      channel: "sms",
      kind: "http",
      url: `http://${name}.invalid/`,
      cost: { default: cost },
      timeoutMs: TIMEOUT_MS,
    },
    send(msg: OutgoingSms): Promise<SentSms> {
      const down = world.down(name);
      if (down === "refuse")
        return Promise.reject(new DeliveryError(`${name}: 503 Service Unavailable`, true));
      if (down === "timeout") {
        return Promise.reject(
          new DeliveryError(`${name}: no answer within ${TIMEOUT_MS} ms`, true, { outcomeUnknown: true }),
        );
      }
      const [user = 0, attempt = 1] = msg.reference.split(".").map(Number);
      const country: Country = msg.to.startsWith("+33") ? "FR" : "DE";
      fate(msg, uniform(world.s.seed, user, 10 + attempt) < world.rate(name, country));
      return Promise.resolve({ providerId: msg.reference });
    },
    onReceipt: () => undefined,
    close: () => Promise.resolve(),
  };
}

/** What a strategy is to the simulation: the Router's calls, or the oracle's answers. */
interface Chooser {
  plan(target: Target, avoid?: string): Plan;
  take(p: DeliveryProvider): boolean;
  submitted(p: DeliveryProvider, plan: Plan, accepted: boolean): void;
  verified(carried: string, e164: string): void;
  /** The end of a simulated second: counts written, then what the service reads every REFRESH_MS. */
  tick(): Promise<void>;
}

/** The settings' defaults (ROUTE_WINDOW_SECONDS 3600, ROUTE_EXPLORE_SHARE 0.1, ROUTE_MIN_SENDS 20, ...). */
export function defaultSettings(): DeliverySettings {
  const shape = Object.fromEntries(
    Object.entries(deliverySettings.definitions).map(([k, d]) => [k, d.schema]),
  );
  return z.object(shape).parse({}) as DeliverySettings;
}

async function routerChooser(
  redis: Redis,
  prefix: string,
  strategy: Exclude<SimStrategy, "oracle">,
  providers: DeliveryProvider[],
  world: World,
): Promise<Chooser> {
  const keys = new DeliveryKeys(new Keys(prefix));
  const config = defaultSettings();
  const store = new RouteStore(redis, keys);
  for (const destination of ["FR", "DE"]) {
    const route: Route = { channel: "sms", destination, providers: ["a", "b", "c"], strategy };
    if (strategy === "weighted") route.weights = [40, 40, 20];
    await store.set(route);
  }
  const stats = new DeliveryStats(redis, keys, {
    windowSeconds: config.ROUTE_WINDOW_SECONDS,
    retentionDays: config.DELIVERY_STATS_RETENTION_DAYS,
    now: world.now,
  });
  const router = new Router(providers, {
    store,
    stats,
    config,
    log: silentLogger,
    now: world.now,
    random: mulberry32(world.s.seed + 7),
  });
  await router.refresh();
  return {
    plan: (target, avoid) => router.plan("sms", target, avoid),
    take: (p) => router.take(p),
    submitted: (p, plan, accepted) => {
      router.submitted(p, plan, accepted);
    },
    verified: (carried, e164) => {
      router.verified("sms", carried, e164);
    },
    // Writes the counts added, then reads the figures again.
    tick: () => router.refresh(),
  };
}

/** Knows the fakes' true rates and A's outage: the best rate that is up now, the cheapest among equals. */
function oracleChooser(providers: DeliveryProvider[], world: World): Chooser {
  return {
    plan: (target) => {
      const country = target.country as Country;
      const score = (p: DeliveryProvider) => world.rate(p.spec.name as Fake, country);
      const order = [...providers].sort(
        (x, y) => score(y) - score(x) || (x.spec.cost.default ?? 0) - (y.spec.cost.default ?? 0),
      );
      return { channel: "sms", route: country, country, providers: order };
    },
    take: () => true,
    submitted: () => undefined,
    verified: () => undefined,
    tick: () => Promise.resolve(),
  };
}

/** A first code accepted: when, where, and by whom. */
interface FirstSend {
  second: number;
  country: Country;
  carrier: Fake;
}

async function simulate(
  redisUrl: string,
  s: Scenario,
  strategy: SimStrategy,
  users: readonly User[],
): Promise<Outcome> {
  const redis = new Redis(redisUrl, { enableAutoPipelining: true });
  const prefix = `routing-sim:${strategy}:${process.pid}:${Date.now()}:`;
  try {
    const world = new World(s);
    const o: Outcome = {
      strategy,
      users: users.length,
      verified: 0,
      retried: 0,
      messages: 0,
      cost: 0,
      outage: { lost: 0, failedOver: 0 },
      frShares: { a: 0, b: 0, c: 0 },
      offB: { before: 0, minutes: undefined },
      backToA: { before: 0, minutes: undefined },
    };
    const arrived = new Set<number>();
    const entered = new Set<number>();
    const firsts: FirstSend[] = [];

    const fates = new Map<string, boolean>();
    const providers = FAKES.map((f) =>
      fakeProvider(f.name, world, (msg, delivered) => fates.set(msg.reference, delivered)),
    );
    const chooser =
      strategy === "oracle"
        ? oracleChooser(providers, world)
        : await routerChooser(redis, prefix, strategy, providers, world);

    /** One code through the plan's providers in turn, as src/verify/delivery.ts submits (without its hold). */
    const send = async (user: User, attempt: 1 | 2, avoid: string | undefined) => {
      const target = { e164: user.e164, country: user.country, network: "" };
      const plan = chooser.plan(target, avoid);
      const msg: OutgoingSms = {
        to: user.e164,
        from: "Ringfence",
        body: "Your code: 000000",
        locale: "en",
        reference: `${user.id}.${attempt}`,
      };
      let failed = 0;
      let waitedMs = 0;
      let carrier: DeliveryProvider | undefined;
      for (const p of plan.providers) {
        if (!chooser.take(p)) continue;
        try {
          await p.send(msg);
          chooser.submitted(p, plan, true);
          carrier = p;
          break;
        } catch (err) {
          if (!(err instanceof DeliveryError)) throw err;
          chooser.submitted(p, plan, false);
          failed += 1;
          // The call waited for the provider's timeout before going on.
          if (err.outcomeUnknown) waitedMs += p.spec.timeoutMs;
        }
      }
      const delivered = fates.get(msg.reference) === true;
      if (world.inOutage()) {
        const down = carrier === undefined || world.down(carrier.spec.name as Fake) !== undefined;
        if (down) o.outage.lost += 1;
        else if (failed > 0) o.outage.failedOver += 1;
      }
      if (carrier !== undefined && delivered) {
        const route = `${carrier.spec.name} ${plan.route}`;
        world.at(world.second + Math.ceil(waitedMs / 1_000) + user.latency[attempt === 1 ? 0 : 1], () => {
          arrived.add(user.id);
          if (!user.noShow && !entered.has(user.id)) {
            entered.add(user.id);
            world.at(world.second + user.think, () => {
              o.verified += 1;
              chooser.verified(route, user.e164);
              return Promise.resolve();
            });
          }
          return Promise.resolve();
        });
      }
      if (carrier !== undefined) {
        o.messages += 1;
        o.cost += carrier.spec.cost.default ?? 0;
        if (attempt === 1) {
          firsts.push({ second: world.second, country: user.country, carrier: carrier.spec.name as Fake });
        }
      }
      if (attempt === 1 && !user.noShow) {
        world.at(world.second + RETRY_AFTER_S, async () => {
          if (arrived.has(user.id)) return;
          o.retried += 1;
          await send(user, 2, carrier?.spec.name);
        });
      }
    };

    let next = 0;
    const end = s.seconds + RETRY_AFTER_S + 120;
    for (world.second = 0; world.second < end; world.second++) {
      for (; next < users.length && users[next]?.at === world.second; next++) {
        await send(users[next] as User, 1, undefined);
      }
      for (const event of world.due(world.second)) await event();
      await chooser.tick();
    }

    readShares(o, s, firsts);
    return o;
  } finally {
    const mine: string[] = [];
    for await (const batch of scanKeys(redis, `${prefix}*`)) mine.push(...batch);
    if (mine.length > 0) await redis.del(...mine);
    redis.disconnect();
  }
}

/** Shares of first codes: FR after B's loss, how soon B was left, how soon A came back. */
function readShares(o: Outcome, s: Scenario, firsts: readonly FirstSend[]): void {
  // `firsts` is in the order of the clock: a range of seconds is a slice found by bisection.
  const index = (second: number) => {
    let lo = 0;
    let hi = firsts.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((firsts[mid]?.second ?? 0) < second) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  const share = (carrier: Fake, from: number, to: number, country?: Country) => {
    const within = firsts
      .slice(index(from), index(to))
      .filter(
        (f) =>
          (country === undefined || f.country === country) &&
          (f.second < s.outage.from || f.second >= s.outage.to),
      );
    return within.length === 0 ? 0 : within.filter((f) => f.carrier === carrier).length / within.length;
  };
  for (const name of ["a", "b", "c"] as const) {
    o.frShares[name] = share(name, s.lossFrom + 900, s.seconds, "FR");
  }
  // Off B: the first whole minute after the loss starts where B carries under 20% of FR.
  o.offB.before = share("b", s.lossFrom - 600, s.lossFrom, "FR");
  if (o.offB.before >= 0.2) {
    for (let m = 0; s.lossFrom + 60 * (m + 1) <= s.outage.from; m++) {
      if (share("b", s.lossFrom + 60 * m, s.lossFrom + 60 * (m + 1), "FR") < 0.2) {
        o.offB.minutes = m + 1;
        break;
      }
    }
  }
  // Back to A: the first whole minute after the outage where A's share is within 10 points of before.
  o.backToA.before = share("a", s.outage.from - 1_200, s.outage.from);
  if (o.backToA.before >= 0.2) {
    for (let m = 0; s.outage.to + 60 * (m + 1) <= s.seconds; m++) {
      if (share("a", s.outage.to + 60 * m, s.outage.to + 60 * (m + 1)) >= o.backToA.before - 0.1) {
        o.backToA.minutes = m + 1;
        break;
      }
    }
  }
}

const LABELS: Record<SimStrategy, string> = {
  failover: "failover (A, B, C)",
  weighted: "weighted 40/40/20",
  cost: "cost",
  conversion: "conversion",
  oracle: "oracle",
};

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

/** The outcomes as a Markdown table, the oracle last and the gaps measured against it. */
export function table(outcomes: readonly Outcome[]): string {
  const oracle = outcomes.find((o) => o.strategy === "oracle");
  const conv = (o: Outcome) => o.verified / o.users;
  const rows = outcomes.map((o) => {
    const gap = oracle === undefined ? "" : (100 * (conv(o) - conv(oracle))).toFixed(1);
    const offB =
      o.offB.before < 0.2
        ? `not on B (${pct(o.offB.before)})`
        : o.offB.minutes === undefined
          ? "never"
          : `${o.offB.minutes} min`;
    const backToA =
      o.backToA.before < 0.2
        ? `A not preferred (${pct(o.backToA.before)})`
        : o.backToA.minutes === undefined
          ? "never"
          : `${o.backToA.minutes} min (to ${pct(o.backToA.before)})`;
    return [
      LABELS[o.strategy],
      pct(conv(o)),
      o.strategy === "oracle" ? "—" : `${gap} pt`,
      (o.cost / o.verified).toFixed(4),
      pct(o.retried / o.users),
      `${o.outage.lost} (${o.outage.failedOver} failed over)`,
      pct(o.frShares.b),
      offB,
      backToA,
    ];
  });
  const head = [
    "Strategy",
    "Conversion",
    "Gap to oracle",
    "Cost per verified user",
    "Second codes",
    "Codes lost in the outage",
    "B's share of FR after the loss",
    "Off B for FR",
    "Back to A after the outage",
  ];
  return [head, head.map(() => "---"), ...rows].map((r) => `| ${r.join(" | ")} |`).join("\n");
}

/** The scenario in one line, printed above the table. */
export function scenarioLine(s: Scenario, users: number): string {
  const hm = (sec: number) =>
    `${Math.floor(sec / 3_600)}:${String(Math.floor((sec % 3_600) / 60)).padStart(2, "0")}`;
  return (
    `${hm(s.seconds)} h simulated, ${users} users (${s.usersPerSecond}/s, FR and DE evenly, seed ${s.seed}); ` +
    `B loses ${100 * B_FR_LOSS}% of FR from ${hm(s.lossFrom)}; A refuses from ${hm(s.outage.from)}, ` +
    `does not answer from ${hm(s.outage.timeoutsFrom)}, is back at ${hm(s.outage.to)}`
  );
}

/** Mulberry32: a small seeded generator of numbers in [0, 1). */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** A number in [0, 1) fixed by its inputs: the same user's same draw in every strategy's run. */
function uniform(...parts: number[]): number {
  let h = 0x9e3779b9;
  for (const part of parts) {
    h = Math.imul(h ^ (part >>> 0), 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h ^= h >>> 16;
  }
  return mulberry32(h)();
}

function poisson(mean: number, random: () => number): number {
  const limit = Math.exp(-mean);
  let k = 0;
  for (let p = random(); p > limit; p *= random()) k += 1;
  return k;
}

const positive =
  (name: string, whole = false) =>
  (v: string) => {
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0 || (whole && !Number.isInteger(n))) {
      throw new InvalidArgumentError(`${name} must be a ${whole ? "whole " : ""}number above 0`);
    }
    return n;
  };

async function main(): Promise<void> {
  const program = new Command("routing:sim")
    .description(
      "Runs each route strategy and an oracle against three fake providers on a simulated clock; prints a Markdown table",
    )
    .option("--hours <n>", "simulated hours of traffic", positive("--hours"), 6)
    .option(
      "--users-per-second <n>",
      "users asking for a code, per simulated second",
      positive("--users-per-second"),
      2,
    )
    .option("--seed <n>", "the seed of users, deliveries and the routers' draws", positive("--seed", true), 1)
    .addHelpText(
      "after",
      "\nREDIS_URL: a Redis to use; unset, a redis-server of its own is started from PATH.",
    );
  const opts = program.parse().opts<{ hours: number; usersPerSecond: number; seed: number }>();
  const s = scenario(opts.hours, { seed: opts.seed, usersPerSecond: opts.usersPerSecond });
  const own = process.env.REDIS_URL === undefined ? await startRedis() : undefined;
  const started = Date.now();
  try {
    const outcomes = await simulateAll(process.env.REDIS_URL ?? own?.url ?? "", s);
    process.stdout.write(`${scenarioLine(s, outcomes[0]?.users ?? 0)}\n\n${table(outcomes)}\n`);
    process.stderr.write(`routing:sim: ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  } finally {
    await own?.stop();
  }
}

// Run as a script, not when a test imports it. No top-level await: with one, the test importing
// this file no longer sees the test Redis of test/support/hooks.ts.
if (process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(
        `routing:sim: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
      );
      process.exit(1);
    },
  );
}
