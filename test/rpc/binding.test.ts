import { expect } from "chai";
import type { MethodDefinition } from "@grpc/grpc-js";
import { refusedBy, RingfenceError } from "../../src/errors.js";
import { createLogger } from "../../src/log.js";
import type { CallRecord } from "../../src/observability/calls.js";
import { bindService, invoke, type Outcome, type UnaryHandler } from "../../src/rpc/binding.js";

/** A one-method service whose handler the test gives; messages pass as they are. */
function serviceWith(handler: UnaryHandler<unknown, unknown>) {
  const same = (x: unknown) => x as Buffer;
  const definition = {
    doIt: {
      path: "/fixture.rpc.v1.Svc/DoIt",
      requestStream: false,
      responseStream: false,
      requestSerialize: same,
      requestDeserialize: same,
      responseSerialize: same,
      responseDeserialize: same,
    } as MethodDefinition<unknown, unknown>,
  };
  return bindService(definition, { doIt: handler }, { dialect: "session" });
}

/** Runs one call as a transport does; resolves its outcome, its record and the lines written. */
async function call(handler: UnaryHandler<unknown, unknown>) {
  const records: CallRecord[] = [];
  const lines: Record<string, unknown>[] = [];
  const log = createLogger("debug", (line) => lines.push(JSON.parse(line) as Record<string, unknown>));
  const outcome: Outcome = await invoke(
    serviceWith(handler),
    "doIt",
    {},
    { transport: "grpc", header: () => undefined, requestId: "rid-7", startedAt: process.hrtime.bigint() },
    { log, docsUrl: "https://docs.example.test", observe: (r) => records.push(r) },
  );
  expect(records).to.have.length(1);
  return { outcome, record: records[0], lines };
}

const tooMany = () => new RingfenceError("too_many_attempts", "try again later", { "retry-after": "3" });

describe("a call's scope, handed down by the binding", () => {
  it("records the rule a thrown refusal carries, after an await as well as at once", async () => {
    const atOnce = await call(() => {
      throw refusedBy("OTP_MAX_CHECKS", tooMany());
    });
    expect(atOnce.record).to.include({
      code: "too_many_attempts",
      refusedBy: "OTP_MAX_CHECKS",
      httpStatus: 429,
    });
    const later = await call(async () => {
      await new Promise((resolve) => setImmediate(resolve));
      throw refusedBy("STEPUP_LIMIT_USER", tooMany());
    });
    expect(later.record).to.include({ code: "too_many_attempts", refusedBy: "STEPUP_LIMIT_USER" });
  });

  it("records a refusal noted inside a success, deep in the call and after an await", async () => {
    const deep = (scope: { noteRefusal(rule: string): void }) =>
      new Promise<void>((resolve) =>
        setImmediate(() => {
          scope.noteRefusal("RATE_LIMIT_NUMBER");
          resolve();
        }),
      );
    const { outcome, record } = await call(async (_req, ctx) => {
      await deep(ctx);
      return { status: "rate_limited" };
    });
    expect(outcome.ok).to.equal(true);
    expect(record).to.include({ code: "ok", refusedBy: "RATE_LIMIT_NUMBER" });
  });

  it("keeps the first rule said: a later note or a thrown refusal's rule does not replace it", async () => {
    const noted = await call((_req, ctx) => {
      ctx.noteRefusal("SPAM_RANGE_BURST");
      ctx.noteRefusal("RATE_LIMIT_ACCOUNT");
      throw refusedBy("RATE_LIMIT_NUMBER", tooMany());
    });
    expect(noted.record?.refusedBy).to.equal("SPAM_RANGE_BURST");
    // refusedBy on an error keeps its first rule too.
    expect(refusedBy("B", refusedBy("A", tooMany())).refusedBy).to.equal("A");
    expect(refusedBy(undefined, tooMany()).refusedBy).to.equal(undefined);
  });

  it("records no rule for a failure that is no refusal", async () => {
    const { record } = await call(() => {
      throw new RingfenceError("bad_request", "no");
    });
    expect(record?.refusedBy).to.equal(undefined);
  });

  it("names the call on every line its scope's log writes, after an await too; a line's own field wins", async () => {
    const { lines } = await call(async (_req, ctx) => {
      ctx.log.warn("first", { reference: "r-1" });
      await new Promise((resolve) => setImmediate(resolve));
      ctx.log.error("second", { method: "its own" });
      ctx.log.info("third");
      return {};
    });
    expect(lines.map((l) => l.msg)).to.deep.equal(["first", "second", "third"]);
    expect(lines[0]).to.include({ request_id: "rid-7", method: "fixture.rpc.v1.Svc/DoIt", reference: "r-1" });
    expect(lines[1]).to.include({ request_id: "rid-7", method: "its own", level: "error" });
    expect(lines[2]).to.include({ request_id: "rid-7", method: "fixture.rpc.v1.Svc/DoIt", level: "info" });
  });
});
