import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { openRegistry } from "../../src/app.js";
import { modules } from "../../src/app.js";
import { serveModules } from "../../src/lifecycle/lifecycle.js";
import { silentLogger, type Logger } from "../../src/log.js";
import type { DeliveryModule } from "../../src/delivery/module.js";
import { DeliveryKeys } from "../../src/delivery/keys.js";
import type { Router } from "../../src/delivery/router.js";
import { RouteStore, type Route } from "../../src/delivery/routes.js";
import { DeliveryStats, type Figures } from "../../src/delivery/stats.js";
import { watchV1Answers } from "./ding-contract.js";
import { testConfig, type TestApp } from "./app.js";
import { testPort } from "./ports.js";
import { sample } from "./metrics.js";
import { eventually } from "./fake-smsc.js";
import type { SmsMessage } from "./receivers.js";

/**
 * The service as startTestApp starts it, plus the delivery module's router, so that a test can
 * make it read the routes and conversion figures now (what it does by itself every REFRESH_MS and
 * on each change announced) instead of waiting for its timer.
 */
export interface RoutedApp extends TestApp {
  router: Router;
  /** The routes of the app's Redis and key prefix, as `ringfence routes` writes them. */
  routes: RouteStore;
  /** The delivery counters of the app's Redis and key prefix, with the app's conversion window. */
  stats: DeliveryStats;
  /**
   * Has the app's router read the routes and figures now. Twice: a reading already under way may
   * have begun before the last change, and a refresh asked meanwhile joins it.
   */
  refresh(): Promise<void>;
  /** Writes `route` and has the app's router read it before resolving. */
  setRoute(route: Route): Promise<void>;
  /** Removes every route and has the app's router read that before resolving. */
  clearRoutes(): Promise<void>;
  /** The app's Prometheus exposition: scraped from ADMIN_PORT's /metrics when it serves one. */
  metrics(): Promise<string>;
  /** Adds a listener of the receipts the delivery module takes (reports, WhatsApp statuses). */
  onReport: DeliveryModule["onReport"];
}

export async function startRoutedApp(
  env: Record<string, string> = {},
  log: Logger = silentLogger,
): Promise<RoutedApp> {
  const httpPort = await testPort();
  const config = testConfig({
    GRPC_PORT: "0",
    HTTP_PORT: String(httpPort),
    ISSUER_URL: `http://127.0.0.1:${httpPort}`,
    ...env,
  });
  const registry = await openRegistry(config, log);
  const all = modules(registry);
  const delivery = all.find((m): m is DeliveryModule => m.name === "delivery");
  if (delivery === undefined) throw new Error("the app has no delivery module");
  const app = await serveModules(registry, all);
  const refresh = async () => {
    await delivery.router.refresh();
    await delivery.router.refresh();
  };
  const keys = new DeliveryKeys(registry.keys);
  const routes = new RouteStore(registry.redis, keys);
  const stats = new DeliveryStats(registry.redis, keys, {
    windowSeconds: config.ROUTE_WINDOW_SECONDS,
    retentionDays: config.DELIVERY_STATS_RETENTION_DAYS,
  });
  return {
    ...app,
    config,
    baseUrl: watchV1Answers(`http://127.0.0.1:${app.httpPort ?? 0}`),
    grpcAddress: `127.0.0.1:${app.grpcPort}`,
    router: delivery.router,
    onReport: (listener) => {
      delivery.onReport(listener);
    },
    routes,
    stats,
    refresh,
    async setRoute(route) {
      await routes.set(route);
      await refresh();
    },
    async clearRoutes() {
      for (const r of await routes.list()) await routes.remove(r.channel, r.destination);
      await refresh();
    },
    async metrics() {
      if (app.adminPort === undefined) return (await registry.metrics.exposition()).body;
      const res = await fetch(`http://127.0.0.1:${app.adminPort}/metrics`);
      if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
      return res.text();
    },
  };
}

/** How an SmsFake answers one request: an HTTP status, or `hang` (never answers until closed). */
export type FakeAnswer = number | "hang";

/**
 * An HTTP SMS provider on loopback (the body of docs/routing.md#providers) that records every
 * request it gets, whatever it answers, so a test sees which providers were tried and which
 * were skipped. `answer` decides each answer, at once or after a while.
 */
export class SmsFake {
  /** Every request, in arrival order. */
  readonly requests: SmsMessage[] = [];
  /** Those it answered 2xx. */
  readonly accepted: SmsMessage[] = [];
  answer: (m: SmsMessage) => FakeAnswer | Promise<FakeAnswer> = () => 200;

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<SmsFake> {
    const ref: { self?: SmsFake } = {};
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const self = ref.self;
        if (self === undefined) return;
        const m = JSON.parse(Buffer.concat(chunks).toString("utf8")) as SmsMessage;
        self.requests.push(m);
        void Promise.resolve(self.answer(m)).then((status) => {
          if (status === "hang") return;
          if (status >= 200 && status < 300) self.accepted.push(m);
          res.statusCode = status;
          res.setHeader("content-type", "application/json");
          res.end(status < 300 ? "{}" : '{"error":"refused"}');
        });
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const self = new SmsFake(server, `http://127.0.0.1:${port}/sms`);
    ref.self = self;
    return self;
  }

  /** The requests sent to `to`. */
  to(to: string): SmsMessage[] {
    return this.requests.filter((m) => m.to === to);
  }

  /** The first request sent to `to`, once it has arrived. */
  async received(to: string, timeoutMs = 10_000): Promise<SmsMessage> {
    await eventually(() => this.to(to).length > 0, timeoutMs);
    const [m] = this.to(to);
    if (m === undefined) throw new Error(`no message to ${to}`);
    return m;
  }

  /** Forgets what it received and answers 200 again. */
  reset(): void {
    this.requests.length = 0;
    this.accepted.length = 0;
    this.answer = () => 200;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

/** `ringfence_delivery_sent_total` of one provider (every channel and country) in an exposition. */
export function sentTotal(metrics: string, provider: string): number {
  return sample(metrics, "ringfence_delivery_sent_total", { provider });
}

/** `ringfence_provider_available` of one provider in an exposition (NaN when it has no sample). */
export function availableGauge(metrics: string, provider: string): number {
  const line = metrics
    .split("\n")
    .find((l) => l.startsWith("ringfence_provider_available{") && l.includes(`provider="${provider}"`));
  return line === undefined ? Number.NaN : Number(line.split(" ").at(-1));
}

/** Each provider's figures summed, as a test compares them with the sends and checks it made. */
export function totals(figures: ReadonlyMap<string, Figures>): Figures {
  const sum = { sent: 0, accepted: 0, verified: 0 };
  for (const f of figures.values()) {
    sum.sent += f.sent;
    sum.accepted += f.accepted;
    sum.verified += f.verified;
  }
  return sum;
}
