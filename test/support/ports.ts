import { randomInt } from "node:crypto";
import { createServer } from "node:net";

/**
 * Ports for what a test must name before it listens: a redis-server (which cannot listen on 0
 * and say where it went), the service's HTTP and admin ports (where 0 turns the listener off), a
 * Prometheus. Whatever can listen on 0 and report its port does so instead: the test's own
 * servers, and the service's gRPC port (GRPC_PORT=0).
 *
 * The ports handed out lie below the ephemeral range (Linux 32768-60999, macOS 49152-65535),
 * where the kernel picks the local port of every outgoing connection: a port found free there
 * may be taken by one of the run's own connections before it is bound. Below that range only a
 * process binding that very port on purpose can take it. A Redis Cluster node also listens on its
 * port + 10000 (the cluster bus): ports are handed out from 12000 to 21999, so that buses land in
 * 22000-31999, below the ephemeral range too and apart from the ports handed out.
 */
export const TEST_PORTS_START = 12_000;
export const BUS_OFFSET = 10_000;
export const TEST_PORTS_END = 32_000 - BUS_OFFSET;

const SPAN = TEST_PORTS_END - TEST_PORTS_START;
/** Where this process starts counting: another test process starts elsewhere in the range. */
const OFFSET = randomInt(SPAN);
let handedOut = 0;

/**
 * A port nothing listens on now on 127.0.0.1, below the ephemeral range, never handed out twice by
 * this process. `bus`: its cluster bus port (port + 10000) is free too.
 */
export async function testPort(options: { bus?: boolean } = {}): Promise<number> {
  while (handedOut < SPAN) {
    const port = TEST_PORTS_START + ((OFFSET + handedOut) % SPAN);
    handedOut += 1;
    if ((await bindable(port)) && (options.bus !== true || (await bindable(port + BUS_OFFSET)))) return port;
  }
  throw new Error(`every port from ${TEST_PORTS_START} to ${TEST_PORTS_END - 1} was handed out`);
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", () => {
      resolve(false);
    });
    probe.listen(port, "127.0.0.1", () => {
      probe.close(() => {
        resolve(true);
      });
    });
  });
}

/** An error or a log that says a port was taken when the process listened. */
export function saysPortInUse(text: unknown): boolean {
  const said = text instanceof Error ? `${text.message} ${String((text as { code?: unknown }).code)}` : text;
  return typeof said === "string" && /EADDRINUSE|Address already in use/.test(said);
}

/**
 * Runs `start` with fresh ports again (at most `attempts` times in all) while it fails because
 * another process took one of them between the probe and the bind.
 */
export async function onFreshPorts<T>(start: () => Promise<T>, attempts = 5): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (err) {
      if (attempt >= attempts || !saysPortInUse(err)) throw err;
    }
  }
}
