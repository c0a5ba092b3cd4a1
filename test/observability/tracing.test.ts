import { expect } from "chai";
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { randomBytes } from "node:crypto";
// The service as operators run it: tracing patches modules as they load, so the build is used.
import { BUILT_CLI, TEST_SECRETS_KEY, runCli } from "../support/app.js";
import { testRedisUrl } from "../support/hooks.js";
import { testPort } from "../support/ports.js";
import { waitFor } from "../support/redis.js";

interface Span {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  scope: string;
  attributes: Record<string, unknown>;
}

/** An OTLP/HTTP receiver (JSON encoding) that keeps every span it is sent. */
async function otlpReceiver(): Promise<{
  url: string;
  spans: Span[];
  requests: () => number;
  close(): Promise<void>;
}> {
  const spans: Span[] = [];
  let requests = 0;
  const server: Server = createServer((req, res) => {
    let body = "";
    req.on("data", (d: Buffer) => (body += d.toString()));
    req.on("end", () => {
      requests += 1;
      if (req.url === "/v1/traces") {
        type Value = Record<string, unknown>;
        const payload = JSON.parse(body) as {
          resourceSpans?: {
            scopeSpans?: {
              scope?: { name?: string };
              spans?: (Omit<Span, "scope" | "attributes"> & {
                attributes?: { key: string; value: Value }[];
              })[];
            }[];
          }[];
        };
        for (const rs of payload.resourceSpans ?? []) {
          for (const ss of rs.scopeSpans ?? []) {
            for (const s of ss.spans ?? []) {
              const attributes = Object.fromEntries(
                (s.attributes ?? []).map((a) => [a.key, Object.values(a.value)[0]]),
              );
              spans.push({ ...s, scope: ss.scope?.name ?? "", attributes });
            }
          }
        }
      }
      res.setHeader("content-type", "application/json");
      res.end("{}");
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    requests: () => requests,
    close: () =>
      new Promise((resolve) => {
        server.close(() => {
          resolve();
        });
      }),
  };
}

describe("OpenTelemetry tracing (OTEL_* variables)", function () {
  this.timeout(60_000);
  const prefix = `trace${randomBytes(3).toString("hex")}:`;
  let dataEnv: Record<string, string> = {};
  before(() => {
    dataEnv = {
      REDIS_URL: testRedisUrl(),
      SECRETS_KEY: TEST_SECRETS_KEY,
      REDIS_KEY_PREFIX: prefix,
      NODE_ENV: "test",
    };
  });
  let child: ChildProcess | undefined;
  const logs: string[] = [];

  async function serve(env: Record<string, string>): Promise<string> {
    const httpPort = await testPort();
    child = spawn(process.execPath, [BUILT_CLI, "serve"], {
      env: {
        PATH: process.env.PATH ?? "",
        ...dataEnv,
        HOST: "127.0.0.1",
        HTTP_PORT: String(httpPort),
        GRPC_PORT: "0",
        ADMIN_PORT: "0",
        ...env,
      },
      stdio: ["ignore", "ignore", "pipe"],
    });
    child.stderr?.on("data", (d: Buffer) =>
      logs.push(
        ...d
          .toString()
          .split("\n")
          .filter((l) => l !== ""),
      ),
    );
    const base = `http://127.0.0.1:${httpPort}`;
    await waitFor(async () => (await fetch(`${base}/healthz`).catch(() => undefined))?.ok === true, 20_000);
    return base;
  }

  afterEach(async () => {
    if (child !== undefined && child.exitCode === null) {
      child.kill("SIGTERM");
      await once(child, "exit");
    }
    child = undefined;
  });

  async function account(): Promise<{ uuid: string; key: string }> {
    const made = await runCli(["accounts", "create", "--name", "Traced", "--balance", "10"], dataEnv);
    expect(made.code, made.stderr).to.equal(0);
    const { customer_uuid: uuid, api_key: key } = JSON.parse(made.stdout) as {
      customer_uuid: string;
      api_key: string;
    };
    return { uuid, key };
  }

  it("exports one trace per call: the gateway's server span, the handler's span, its Redis commands", async () => {
    const receiver = await otlpReceiver();
    try {
      const { uuid, key } = await account();
      const base = await serve({
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_BSP_SCHEDULE_DELAY: "100",
      });
      const res = await fetch(`${base}/v1/authentication`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": key },
        body: JSON.stringify({ customer_uuid: uuid, phone_number: "+33612000901" }),
      });
      expect(res.status).to.equal(200);
      const handlerOf = () =>
        receiver.spans.find((s) => s.name === "ringfence.verify.v1.VerifyService/CreateAuthentication");
      await waitFor(() =>
        Promise.resolve(handlerOf() !== undefined && receiver.spans.some((s) => s.scope.includes("http"))),
      );
      const handler = handlerOf();
      const trace = receiver.spans.filter((s) => s.traceId === handler?.traceId);
      const server = trace.find((s) => s.scope === "@opentelemetry/instrumentation-http" && s.kind === 2);
      expect(server, "the gateway's server span").to.not.equal(undefined);
      expect(handler?.parentSpanId).to.equal(server?.spanId);
      expect(handler?.attributes).to.include({
        "rpc.service": "ringfence.verify.v1.VerifyService",
        "rpc.method": "CreateAuthentication",
        "ringfence.transport": "http",
        "ringfence.code": "ok",
        "ringfence.request_id": res.headers.get("x-request-id"),
      });
      const redis = trace.filter((s) => s.scope === "@opentelemetry/instrumentation-ioredis");
      expect(redis.length, "Redis command spans").to.be.greaterThan(0);
      expect(redis.every((s) => s.parentSpanId === handler?.spanId)).to.equal(true);
      // Command names only: arguments (numbers, hashed secrets, scripts' JSON) stay out of traces.
      for (const s of redis) {
        const statement = s.attributes["db.statement"] ?? s.attributes["db.query.text"] ?? s.name;
        expect(statement)
          .to.be.a("string")
          .and.match(/^[a-z]+$/);
      }
      expect(JSON.stringify(receiver.spans)).to.not.include(key);
      expect(JSON.stringify(receiver.spans)).to.not.include('+33612000901"');
      // The request's log line names its trace.
      const line = logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === "call");
      expect(line?.trace_id).to.equal(handler?.traceId);
    } finally {
      await receiver.close();
    }
  });

  it("stays off, exporting nothing, without an OTLP endpoint", async () => {
    const receiver = await otlpReceiver();
    try {
      const base = await serve({});
      await fetch(`${base}/v1/lookup/+33612345678`);
      await new Promise((r) => setTimeout(r, 500));
      expect(receiver.requests()).to.equal(0);
      const line = logs
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .findLast((l) => l.msg === "call");
      expect(line).to.not.have.property("trace_id");
    } finally {
      await receiver.close();
    }
  });
});
