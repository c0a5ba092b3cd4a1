import { expect } from "chai";
import { Metadata, status, type ServiceError } from "@grpc/grpc-js";
import { LookupServiceClient } from "../../src/gen/ringfence/lookup/v1/lookup_service.js";
import { VerifyServiceClient } from "../../src/gen/ringfence/verify/v1/verify_service.js";
import { Status } from "../../src/gen/google/rpc/status.js";
import {
  BadRequest,
  ErrorInfo,
  Help,
  RequestInfo,
  RetryInfo,
} from "../../src/gen/google/rpc/error_details.js";
import { ERROR_DOMAIN, STATUS_DETAILS_KEY, statusDetails } from "../../src/grpc/status-details.js";
import { deadlineOf } from "../../src/gateway/deadline.js";
import { testCall } from "../support/call.js";
import { createSmsProvider } from "../../src/messaging/sms.js";
import { guardedSms } from "../../src/messaging/guarded.js";
import { Metrics } from "../../src/observability/metrics.js";
import { silentLogger } from "../../src/log.js";
import { ERRORS, RingfenceError, toWire, type ErrorCode } from "../../src/errors.js";
import { insecure, metadata, startTestApp, unary, type TestApp } from "../support/app.js";
import { fundedAccount } from "../support/v1.js";
import { SmsReceiver } from "../support/receivers.js";
import { rest } from "../support/rest.js";

/** The google.rpc.Status of a failed call, its details unpacked by type. */
function statusOf(err: ServiceError | null) {
  const bin = err?.metadata.get(STATUS_DETAILS_KEY)[0];
  expect(bin, "grpc-status-details-bin").to.be.instanceOf(Buffer);
  const decoded = Status.decode(bin as Buffer);
  const of = <T>(type: string, codec: { decode(b: Uint8Array): T }): T | undefined => {
    const any = decoded.details.find((d) => d.typeUrl === `type.googleapis.com/google.rpc.${type}`);
    return any === undefined ? undefined : codec.decode(any.value);
  };
  return {
    status: decoded,
    errorInfo: of("ErrorInfo", ErrorInfo),
    requestInfo: of("RequestInfo", RequestInfo),
    badRequest: of("BadRequest", BadRequest),
    retryInfo: of("RetryInfo", RetryInfo),
    help: of("Help", Help),
  };
}

describe("gRPC errors as google.rpc.Status (AIP-193), and deadlines", () => {
  let app: TestApp;
  let sms: SmsReceiver;
  let customer: { uuid: string; key: string };

  before(async function () {
    this.timeout(30_000);
    sms = await SmsReceiver.start();
    app = await startTestApp({ SMS_PROVIDER: "http", SMS_HTTP_URL: sms.url, RATE_LIMIT_NUMBER: "1/600" });
    const made = await fundedAccount(app.registry.accounts, "Status", 100_000_000);
    customer = { uuid: made.account.customerUuid, key: made.apiKey };
  });
  after(async () => {
    await app.stop();
    await sms.close();
  });

  it("a gRPC client reads ErrorInfo.reason (the error code), the request id and the docs link", async () => {
    const client = new LookupServiceClient(app.grpcAddress, insecure);
    try {
      const { err } = await unary(
        client.lookupPhoneNumber.bind(client),
        { phoneNumber: "+33612345678", type: [] },
        metadata({ "customer-uuid": customer.uuid, "x-api-key": "rfk_wrong", "x-request-id": "status-1" }),
      );
      expect(err?.code).to.equal(status.UNAUTHENTICATED);
      const d = statusOf(err);
      expect(d.status.code).to.equal(status.UNAUTHENTICATED);
      expect(d.status.message).to.equal(err?.details);
      expect(d.errorInfo).to.deep.equal({ reason: "account_invalid", domain: ERROR_DOMAIN, metadata: {} });
      expect(d.requestInfo?.requestId).to.equal("status-1");
      expect(d.help?.links[0]?.url).to.equal(`${app.config.DOCS_URL}/errors#account_invalid`);
      // The markers Envoy's transcoder turns into the REST answer are still there.
      expect(err?.metadata.get("x-http-status")).to.deep.equal(["400"]);
    } finally {
      client.close();
    }
  });

  it("names the field at fault in ErrorInfo.metadata and BadRequest", async () => {
    const client = new VerifyServiceClient(app.grpcAddress, insecure);
    try {
      const { err } = await unary(
        client.checkAuthentication.bind(client),
        {
          customerUuid: customer.uuid,
          authenticationUuid: "00000000-0000-4000-8000-000000000000",
          checkCode: "abc",
        },
        metadata({ "x-api-key": customer.key }),
      );
      expect(err?.code).to.equal(status.INVALID_ARGUMENT);
      const d = statusOf(err);
      expect(d.errorInfo?.reason).to.equal("bad_request");
      expect(d.errorInfo?.metadata).to.deep.equal({ field: "check_code" });
      expect(d.badRequest?.fieldViolations).to.deep.equal([
        { field: "check_code", description: err?.details },
      ]);
    } finally {
      client.close();
    }
  });

  it("says when to try again in RetryInfo and ErrorInfo.metadata for a refusal with Retry-After", () => {
    const wire = toWire(
      new RingfenceError("too_many_attempts", "too many code checks: try again later", {
        "retry-after": "7",
      }),
      "session",
      app.config.DOCS_URL,
    );
    const bin = statusDetails(wire, "retry-1");
    const md = new Metadata();
    md.set(STATUS_DETAILS_KEY, bin);
    const d = statusOf({ metadata: md } as ServiceError);
    expect(d.status.code).to.equal(status.RESOURCE_EXHAUSTED);
    expect(d.errorInfo).to.deep.equal({
      reason: "too_many_attempts",
      domain: ERROR_DOMAIN,
      metadata: { retry_after: "7" },
    });
    expect(d.retryInfo?.retryDelay).to.deep.equal({ seconds: 7, nanos: 0 });
    expect(d.requestInfo?.requestId).to.equal("retry-1");
    expect(d.help).to.equal(undefined);
  });

  it("answers ErrorInfo on every code of the error table, reason = the code", () => {
    for (const code of Object.keys(ERRORS) as ErrorCode[]) {
      const wire = toWire(new RingfenceError(code, "m"), "session", app.config.DOCS_URL);
      const md = new Metadata();
      md.set(STATUS_DETAILS_KEY, statusDetails(wire, "r"));
      const d = statusOf({ metadata: md } as ServiceError);
      expect(d.errorInfo?.reason, code).to.equal(code);
      expect(d.status.code, code).to.equal(ERRORS[code].grpc);
    }
  });

  it("refuses a REST call already past its grpc-timeout with 504: no SMS, no charge", async () => {
    const before = sms.messages.length;
    const balance = (await app.registry.accounts.get(customer.uuid))?.balanceMicros;
    const res = await rest(app.baseUrl).post(
      "/v1/authentication",
      { customer_uuid: customer.uuid, phone_number: "+33612000501" },
      { "x-api-key": customer.key, "grpc-timeout": "1n" },
    );
    expect(res.status).to.equal(504);
    expect(res.body).to.deep.equal({
      code: "internal_server_error",
      message: "the call's deadline passed before the call started",
      doc_url: `${app.config.DOCS_URL}/errors#internal_server_error`,
    });
    await new Promise((r) => setTimeout(r, 200));
    expect(sms.messages.length).to.equal(before);
    expect((await app.registry.accounts.get(customer.uuid))?.balanceMicros).to.equal(balance);
    // A generous grpc-timeout changes nothing.
    const ok = await rest(app.baseUrl).post(
      "/v1/authentication",
      { customer_uuid: customer.uuid, phone_number: "+33612000502" },
      { "x-api-key": customer.key, "grpc-timeout": "30S" },
    );
    expect(ok.status).to.equal(200);
  });

  it("sends no message once the call's deadline passed, however deep in the call", async () => {
    const provider = guardedSms(
      createSmsProvider({ SMS_PROVIDER: "http", SMS_HTTP_URL: sms.url }, silentLogger),
      new Metrics(),
    );
    const before = sms.messages.length;
    const msg = {
      to: "+33612000503",
      from: "Ringfence",
      body: "code 123456",
      locale: "en",
      reference: "late.1",
    };
    const late = provider.send(msg, { ...testCall(), deadlineMs: Date.now() - 1 });
    const err = await late.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(RingfenceError);
    expect((err as RingfenceError).code).to.equal("deadline_exceeded");
    // In time, and outside any call (recovery of held messages), it sends.
    await provider.send({ ...msg, reference: "late.2" }, { ...testCall(), deadlineMs: Date.now() + 10_000 });
    await provider.send({ ...msg, reference: "late.3" });
    expect(sms.messages.slice(before).map((m) => m.reference)).to.deep.equal(["late.2", "late.3"]);
    await provider.close();
  });

  it("reads grpc-timeout values in every unit and ignores malformed ones", () => {
    const now = 1_000_000;
    expect(deadlineOf("2H", now)).to.equal(now + 7_200_000);
    expect(deadlineOf("3M", now)).to.equal(now + 180_000);
    expect(deadlineOf("5S", now)).to.equal(now + 5_000);
    expect(deadlineOf("250m", now)).to.equal(now + 250);
    expect(deadlineOf("1000u", now)).to.equal(now + 1);
    expect(deadlineOf("1000000n", now)).to.equal(now + 1);
    for (const bad of [undefined, "", "5", "5s", "-1S", "123456789S", "1.5S"]) {
      expect(deadlineOf(bad, now), String(bad)).to.equal(undefined);
    }
  });
});
