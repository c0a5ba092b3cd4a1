/**
 * The gRPC load driver, a process of its own: `connections` unary calls kept in flight over a few
 * channels (each its own HTTP/2 connection) for `seconds`; each loop makes its next call as soon
 * as the previous one is answered.
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import type { Fixture } from "./calls.js";
import { exitWithParent, tell } from "./child.js";
import { grpcChannel, type GrpcCall } from "./grpc-calls.js";
import { Latencies, type LoadResult } from "./stats.js";

export interface GrpcLoad {
  address: string;
  call: GrpcCall;
  fixture: Fixture;
  connections: number;
  /** HTTP/2 connections the calls are spread over. */
  channels: number;
  seconds: number;
}

exitWithParent();
// The bench sends the load once told that this process listens (an earlier message would be lost).
process.once("message", (load: GrpcLoad) => {
  void drive(load).then((result) => {
    tell({ result });
  });
});
tell({ ready: true });

async function drive(load: GrpcLoad): Promise<LoadResult> {
  const channels = Array.from({ length: load.channels }, () =>
    grpcChannel(load.address, load.call, load.fixture),
  );
  await Promise.all(channels.map((c) => c.ready()));
  const latencies = new Latencies();
  const statuses: Record<string, number> = {};
  const errors: string[] = [];
  let issued = 0;
  let ok = 0;
  let failed = 0;
  const started = process.hrtime.bigint();
  const end = started + BigInt(Math.round(load.seconds * 1e9));
  const loop = async (channel: (typeof channels)[number]) => {
    while (process.hrtime.bigint() < end) {
      const t0 = process.hrtime.bigint();
      try {
        await channel.call(issued++);
        ok++;
      } catch (err) {
        failed++;
        const code = (err as Partial<ServiceError>).code;
        const name = code === undefined ? "error" : status[code];
        statuses[name] = (statuses[name] ?? 0) + 1;
        if (errors.length < 5) errors.push((err as Error).message);
      }
      latencies.add(Number(process.hrtime.bigint() - t0) / 1e6);
    }
  };
  await Promise.all(
    Array.from({ length: load.connections }, (_, i) => {
      const channel = channels[i % channels.length];
      return channel === undefined ? Promise.resolve() : loop(channel);
    }),
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  for (const c of channels) c.close();
  const [p50 = NaN, p99 = NaN] = latencies.percentiles(50, 99);
  if (ok > 0) statuses.OK = ok;
  return { ok, failed, seconds, rps: ok / seconds, p50, p99, statuses, issued, errors };
}
