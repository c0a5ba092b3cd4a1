import { isSend, type Call } from "./calls.js";
import type { RedisCount } from "./redis-count.js";
import { medianBy, type LoadResult } from "./stats.js";

export type Target = "ringfence" | "three-providers" | "oidc-provider" | "floor" | "send-floor";

/**
 * The targets that are our service: `ringfence` (one SMS provider, `SMS_PROVIDER=http`) and
 * `three-providers`, the same service with three providers and a `conversion` route for French
 * numbers (bench/service.ts, threeProvidersEnv). Both get the Redis columns.
 */
export const SERVICE_TARGETS: readonly Target[] = ["ringfence", "three-providers"];

export const isService = (t: Target): boolean => SERVICE_TARGETS.includes(t);

/** The key of a cell's Redis work for one of our targets in Report.redis: the cell's id for `ringfence`. */
export const redisKey = (cell: Pick<Cell, "id">, t: Target): string =>
  t === "ringfence" ? cell.id : `${cell.id}:${t}`;

export interface Cell {
  /** The name `--only` takes. */
  id: string;
  label: string;
  transport: "rest" | "grpc";
  call: Call;
  /** References measured beside ours. */
  refs: Target[];
}

export const CELLS: Cell[] = [
  {
    id: "rest-token",
    label: "REST token",
    transport: "rest",
    call: "token",
    refs: ["oidc-provider", "floor"],
  },
  { id: "rest-lookup", label: "REST lookup", transport: "rest", call: "lookup", refs: [] },
  {
    id: "rest-send",
    label: "REST send",
    transport: "rest",
    call: "send",
    refs: ["send-floor", "three-providers"],
  },
  {
    id: "rest-send-intl",
    label: "REST send, 12 countries",
    transport: "rest",
    call: "intlsend",
    refs: [],
  },
  { id: "rest-check", label: "REST check", transport: "rest", call: "check", refs: [] },
  { id: "rest-readback", label: "REST read-back", transport: "rest", call: "readback", refs: [] },
  { id: "rest-v2-lookup", label: "REST V2 lookup", transport: "rest", call: "v2lookup", refs: [] },
  { id: "rest-v2-check", label: "REST V2 check", transport: "rest", call: "v2check", refs: [] },
  {
    id: "rest-introspect",
    label: "REST introspection",
    transport: "rest",
    call: "introspect",
    refs: [],
  },
  { id: "grpc-token", label: "gRPC token", transport: "grpc", call: "token", refs: ["floor"] },
  { id: "grpc-lookup", label: "gRPC lookup", transport: "grpc", call: "lookup", refs: [] },
];

export function targetLabel(cell: Cell, t: Target): string {
  if (t === "ringfence") return "ringfence";
  if (t === "three-providers") return "ringfence, three providers, conversion route";
  if (t === "oidc-provider") return "node-oidc-provider";
  if (t === "send-floor") return "send floor: node:http + one Lua script + keep-alive POST";
  return cell.transport === "rest" ? "floor: node:http + jose" : "floor: grpc-js + jose";
}

/** Redis commands a successful token may cost, those run inside Lua scripts included. */
export const TOKEN_COMMANDS = 3;

/**
 * Bytes a send may write to Redis: half the 9,095 a send wrote before its cost was worked on
 * (b8e2751, counted by this bench's proxy: docs/benchmark.md#sending-a-code-against-the-send-floor-2026-11-27).
 */
export const SEND_BYTES = 4_548;

/** Redis round trips per call that the issue allows on the answer path. */
export const ROUND_TRIP_TARGETS: Partial<Record<Cell["call"], number>> = {
  token: 1,
  lookup: 1,
  check: 1,
  readback: 1,
  send: 2,
  intlsend: 2,
  v2lookup: 1,
  // The target index, then the check script with the correlation_id (docs/v2-api.md#check).
  v2check: 2,
  // A valid server token: its client and its revocation, read together (docs/session-api.md#introspection).
  introspect: 1,
};

export interface Meta {
  date: string;
  cpus: string;
  os: string;
  node: string;
  redis: string;
  workers: string;
  changedSettings: Record<string, string>;
  serviceProcesses: number;
  connections: number;
  seconds: number;
  /** Load on the same target and cell before each measured run, not measured. */
  warmupSeconds: number;
  rounds: number;
  sequentialCalls: number;
  /** How the three-provider service differs from the service, when a cell measured it. */
  threeProviders?: string;
}

export interface Report {
  meta: Meta;
  /** Every round of every cell and target, in the order run. */
  runs: { round: number; cell: string; target: Target; result: LoadResult }[];
  /** By redisKey: the cell's id for `ringfence`, `<cell>:three-providers` for the three-provider service. */
  redis: Record<string, RedisCount>;
  /** Messages the stub took at each path of the three-provider service's providers, over the whole run. */
  providerMessages?: Record<string, number>;
}

const fixed = (n: number | undefined, digits = 2) =>
  n === undefined || Number.isNaN(n) ? "—" : n.toFixed(digits);
const ratio = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined || b === 0 ? "—" : `${(a / b).toFixed(2)}×`;

const verdict = (ok: boolean | undefined) => (ok === undefined ? "not measured" : ok ? "met" : "MISSED");

/** The median round (by req/s) of one cell and target. */
export function median(report: Report, cell: string, target: Target): LoadResult | undefined {
  return medianBy(
    report.runs.filter((r) => r.cell === cell && r.target === target).map((r) => r.result),
    (r) => r.rps,
  );
}

/** The markdown report: machine and settings, the table, the targets, and what the answers were. */
export function markdown(report: Report, cells: Cell[]): string {
  const m = report.meta;
  const lines = [
    `Ringfence bench, ${m.date}`,
    "",
    `- Machine: ${m.cpus}; ${m.os}; Node ${m.node}; Redis ${m.redis}`,
    `- Service: \`node dist/cli.js serve\`, NODE_ENV=production, WORKERS=${m.workers}, ${m.serviceProcesses} process(es); settings changed from their defaults: ${Object.entries(
      m.changedSettings,
    )
      .map(([k, v]) => `${k}=${v}`)
      .join(", ")}`,
    `- Load: ${m.connections} connections (gRPC: calls in flight), ${m.seconds} s per cell, each after ${m.warmupSeconds} s of the same calls to the same target (not measured), ${m.rounds} round(s) alternating the targets' order; the median round by req/s is shown`,
    `- Redis columns: ${m.sequentialCalls} sequential calls per cell; commands and all round trips less an idle period as long; awaited round trips from the slow-down per ms of delay added to each Redis answer (5 ms, then 15 ms); checks send a wrong code`,
    ...(m.threeProviders === undefined ? [] : [`- Three providers: ${m.threeProviders}`]),
    "",
    "| Call | Target | req/s | p50 ms | p99 ms | ours / node-oidc-provider | ours / floor | Redis cmds/call | Redis round trips/call, awaited | Redis round trips/call, all | Redis bytes written/call |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const cell of cells) {
    for (const target of ["ringfence", ...cell.refs] as Target[]) {
      const r = median(report, cell.id, target);
      const isOurs = isService(target);
      const count = isOurs ? report.redis[redisKey(cell, target)] : undefined;
      const oidc = cell.refs.includes("oidc-provider") ? median(report, cell.id, "oidc-provider") : undefined;
      const floorTarget = cell.refs.find((t) => t === "floor" || t === "send-floor");
      const floor = floorTarget === undefined ? undefined : median(report, cell.id, floorTarget);
      lines.push(
        `| ${cell.label} | ${targetLabel(cell, target)} | ${fixed(r?.rps, 0)} | ${fixed(r?.p50)} | ${fixed(r?.p99)} | ${
          isOurs && oidc !== undefined ? ratio(r?.rps, oidc.rps) : "—"
        } | ${isOurs && floor !== undefined ? ratio(r?.rps, floor.rps) : "—"} | ${fixed(count?.commands)} | ${fixed(
          count?.answerPathRoundTrips,
        )} | ${fixed(count?.roundTrips)} | ${fixed(count?.bytesWritten, 0)} |`,
      );
    }
  }
  lines.push("", ...targets(report, cells), "", ...answers(report, cells));
  const cpu = serverCpu(report, cells);
  if (cpu.length > 0) lines.push("", ...cpu);
  return lines.join("\n") + "\n";
}

/** The issue's done-when targets, each met or missed by this run. */
function targets(report: Report, cells: Cell[]): string[] {
  const out = ["Targets:"];
  const has = (id: string) => cells.some((c) => c.id === id);
  if (has("rest-token")) {
    const ours = median(report, "rest-token", "ringfence");
    const oidc = median(report, "rest-token", "oidc-provider");
    const floor = median(report, "rest-token", "floor");
    const ratio = (ref: LoadResult | undefined) =>
      ours !== undefined && ref !== undefined ? ours.rps / ref.rps : undefined;
    const [vsFloor, vsOidc] = [ratio(floor), ratio(oidc)];
    out.push(
      `- REST tokens/s ≥ 0.75× the no-Redis floor: ${fixed(vsFloor)}×, ${verdict(vsFloor === undefined ? undefined : vsFloor >= 0.75)}`,
      `- REST tokens/s ≥ 1.8× node-oidc-provider: ${fixed(vsOidc)}×, ${verdict(vsOidc === undefined ? undefined : vsOidc >= 1.8)}`,
      `- REST token p99 ≤ 10 ms at ${report.meta.connections} connections: ${fixed(ours?.p99)} ms, ${verdict(
        ours === undefined ? undefined : ours.p99 <= 10,
      )}`,
    );
  }
  if (has("grpc-token")) {
    const ours = median(report, "grpc-token", "ringfence");
    const floor = median(report, "grpc-token", "floor");
    const x = ours !== undefined && floor !== undefined ? ours.rps / floor.rps : undefined;
    out.push(
      `- gRPC token calls/s ≥ 0.85× the bare grpc-js signer: ${fixed(x)}×, ${verdict(x === undefined ? undefined : x >= 0.85)}`,
    );
  }
  if (has("rest-send")) {
    const ours = median(report, "rest-send", "ringfence")?.serverCpuUs;
    const floor = median(report, "rest-send", "send-floor")?.serverCpuUs;
    const x = ours !== undefined && floor !== undefined ? ours / floor : undefined;
    out.push(
      `- REST send CPU per call ≤ 3× the send floor's: ${fixed(x)}×, ${verdict(x === undefined ? undefined : x <= 3)}`,
    );
  }
  const sendCell = cells.find((c) => c.id === "rest-send");
  if (sendCell?.refs.includes("three-providers") === true) out.push(threeProvidersCpu(report));
  if (has("rest-send") && has("rest-send-intl")) {
    const fr = median(report, "rest-send", "ringfence")?.serverCpuUs;
    const intl = median(report, "rest-send-intl", "ringfence")?.serverCpuUs;
    const x = fr !== undefined && intl !== undefined ? intl / fr : undefined;
    out.push(
      `- International send CPU per call within 20% of the French one: ${fixed(x)}×, ${verdict(x === undefined ? undefined : x <= 1.2)}`,
    );
  }
  for (const { cell, label, count } of counted(report, cells)) {
    if (!isSend(cell.call)) continue;
    out.push(
      `- ${label}: ≤ ${SEND_BYTES} bytes written to Redis per send: ${fixed(count.bytesWritten, 0)}, ${verdict(
        count.bytesWritten <= SEND_BYTES,
      )}`,
    );
  }
  for (const { cell, label, count } of counted(report, cells)) {
    if (cell.call !== "token") continue;
    out.push(
      `- ${label}: ≤ ${TOKEN_COMMANDS} Redis commands per successful token: ${fixed(count.commands)}, ${verdict(
        count.commands <= TOKEN_COMMANDS,
      )}`,
    );
  }
  for (const { cell, label, count } of counted(report, cells)) {
    const limit = ROUND_TRIP_TARGETS[cell.call];
    if (limit === undefined) continue;
    out.push(
      `- ${label}: ≤ ${limit} Redis round trip(s) on the answer path: ${fixed(count.answerPathRoundTrips)} (read to the nearest whole number), ${verdict(
        Math.round(count.answerPathRoundTrips) <= limit,
      )}`,
    );
  }
  return out;
}

/** Each cell's Redis work of each of our targets counted, the service's first: `REST send`, `REST send, three providers`. */
function counted(report: Report, cells: Cell[]): { cell: Cell; label: string; count: RedisCount }[] {
  return cells.flatMap((cell) =>
    SERVICE_TARGETS.filter((t) => t === "ringfence" || cell.refs.includes(t)).flatMap((t) => {
      const count = report.redis[redisKey(cell, t)];
      const label = t === "ringfence" ? cell.label : `${cell.label}, three providers`;
      return count === undefined ? [] : [{ cell, label, count }];
    }),
  );
}

/**
 * The REST send's CPU per call with three providers and a `conversion` route over the one with one
 * provider, from the median rounds (by req/s) as every CPU ratio here, with each round's own ratio
 * beside it: the issue's "no higher than with one provider", measured in the same rounds.
 */
function threeProvidersCpu(report: Report): string {
  const one = median(report, "rest-send", "ringfence");
  const three = median(report, "rest-send", "three-providers");
  const x =
    one?.serverCpuUs !== undefined && three?.serverCpuUs !== undefined
      ? three.serverCpuUs / one.serverCpuUs
      : undefined;
  // The median rounds of the two are picked each by its own req/s, often in different rounds: each
  // round's own ratio, the two measured minutes apart, moves less with the machine's drift.
  const perRound: number[] = [];
  for (const run of report.runs) {
    if (run.cell !== "rest-send" || run.target !== "three-providers") continue;
    const base = report.runs.find(
      (r) => r.cell === "rest-send" && r.target === "ringfence" && r.round === run.round,
    )?.result.serverCpuUs;
    const cpu = run.result.serverCpuUs;
    if (base !== undefined && cpu !== undefined) perRound.push(cpu / base);
  }
  const sorted = [...perRound].sort((a, b) => a - b);
  const rounds =
    perRound.length > 1
      ? `; round by round ${perRound.map((r) => `${r.toFixed(3)}×`).join(", ")}, median ${(
          sorted[Math.floor(sorted.length / 2)] ?? NaN
        ).toFixed(3)}×`
      : "";
  const detail =
    x === undefined
      ? ""
      : ` (${fixed(three?.serverCpuUs, 0)} against ${fixed(one?.serverCpuUs, 0)} µs; ${fixed(three?.rps, 0)} against ${fixed(
          one?.rps,
          0,
        )} req/s${rounds})`;
  return `- REST send CPU per call, three providers / one provider ≤ 1.00×: ${fixed(x, 3)}×${detail}, ${verdict(
    x === undefined ? undefined : x <= 1,
  )}`;
}

/** What the calls were answered in the median rounds, so that a fast error is never read as a fast call. */
function answers(report: Report, cells: Cell[]): string[] {
  const out = ["Answers in the rounds shown:"];
  for (const cell of cells) {
    for (const target of ["ringfence", ...cell.refs] as Target[]) {
      const r = median(report, cell.id, target);
      if (r === undefined) continue;
      const mix = Object.entries(r.statuses)
        .map(([s, n]) => `${s} ${n}`)
        .join(", ");
      const failed = r.failed > 0 ? `; failed ${r.failed} (${r.errors.join("; ")})` : "";
      out.push(`- ${cell.label}, ${targetLabel(cell, target)}: ${mix}${failed}`);
    }
  }
  const messages = report.providerMessages;
  if (messages !== undefined) {
    out.push(
      `- Messages the three-provider service gave each provider over the whole run (its route spreads them, or only the first gets any): ${Object.entries(
        messages,
      )
        .map(([p, n]) => `${p} ${n}`)
        .join(", ")}`,
    );
  }
  return out;
}

/**
 * What each call cost its server in CPU, in the rounds shown: read beside req/s, which the load
 * tool and the other processes sharing the cores move, it says where a difference comes from.
 */
function serverCpu(report: Report, cells: Cell[]): string[] {
  const rows: string[] = [];
  for (const cell of cells) {
    const costs = (["ringfence", ...cell.refs] as Target[]).flatMap((target) => {
      const r = median(report, cell.id, target);
      if (r?.serverCpuUs === undefined) return [];
      const redis = r.redisCpuUs === undefined ? "" : ` (Redis ${r.redisCpuUs.toFixed(0)} µs)`;
      return [`${targetLabel(cell, target)} ${r.serverCpuUs.toFixed(0)} µs${redis}`];
    });
    if (costs.length > 0) rows.push(`- ${cell.label}: ${costs.join(", ")}`);
  }
  return rows.length === 0
    ? []
    : [
        "Server CPU per call in the rounds shown (user and system time of the server's processes, threads included, per call answered; in brackets, Redis's):",
        ...rows,
      ];
}
