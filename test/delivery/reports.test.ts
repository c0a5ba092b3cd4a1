import { expect } from "chai";
import { startTestApp, type TestApp } from "../support/app.js";
import { FakeSmsc } from "../support/fake-smsc.js";
import { SmsReceiver } from "../support/receivers.js";
import { rest, type Json, type RestAnswer } from "../support/rest.js";
import { postSend } from "../support/v1.js";
import { authUuidOfVerification } from "../../src/verify/events.js";

const ALPHA_TOKEN = "alpha-status-token-0123456789abcdef";
const BETA_TOKEN = "beta-status-token-0123456789abcdef";

/**
 * Delivery reports of http providers, through the built-in REST gateway as providers send them:
 * the service runs with three DELIVERY_PROVIDERS (alpha and beta over http with a status token
 * each, gamma over SMPP), sends go through alpha first, and a report names the `reference` the
 * provider received with the message.
 */
describe("delivery reports of http providers (POST /v1/delivery/status/{provider})", () => {
  let app: TestApp;
  let alpha: SmsReceiver;
  let beta: SmsReceiver;
  let plain: SmsReceiver;
  let smsc: FakeSmsc;
  let customer: { uuid: string; apiKey: string };
  let nextNumber = 612_700_000;
  /** A French mobile number in a range of its own, so per-number and per-range windows stay apart. */
  const freshNumber = () => `+33${(nextNumber += 1000)}`;

  before(async function () {
    this.timeout(30_000);
    alpha = await SmsReceiver.start();
    beta = await SmsReceiver.start();
    plain = await SmsReceiver.start();
    smsc = await FakeSmsc.start();
    app = await startTestApp({
      DELIVERY_PROVIDERS: JSON.stringify([
        { name: "alpha", url: alpha.url, status_token: ALPHA_TOKEN },
        { name: "beta", url: beta.url, status_token: BETA_TOKEN },
        { name: "plain", url: plain.url },
        { name: "gamma", url: smsc.url() },
      ]),
    });
    const made = await app.registry.accounts.create({
      name: "Reports",
      balanceMicros: 100_000_000,
      spendingLimitMicros: 1_000_000_000,
      features: [],
      regions: [],
    });
    customer = { uuid: made.account.customerUuid, apiKey: made.apiKey };
  });
  after(async () => {
    await app.stop();
    await Promise.all([alpha.close(), beta.close(), plain.close(), smsc.close()]);
  });

  /** A report as a provider sends it; `token` null sends no authorization. */
  const report = (provider: string, body: unknown, token: string | null = ALPHA_TOKEN) =>
    rest(app.baseUrl).call("POST", `/v1/delivery/status/${provider}`, {
      body,
      ...(token === null ? {} : { bearer: token }),
    });

  /** A V1 authentication whose message alpha received; its uuid and the message's reference. */
  async function sentV1(): Promise<{ auth: string; reference: string }> {
    const before = alpha.messages.length;
    const sent = await postSend(app.baseUrl, customer.apiKey, {
      customer_uuid: customer.uuid,
      phone_number: freshNumber(),
    });
    expect(sent.status, sent.text).to.equal(200);
    const message = await alpha.message(before);
    return { auth: String(sent.body.authentication_uuid), reference: message.reference };
  }

  const events = async (auth: string) => (await app.registry.verify.get(customer.uuid, auth))?.events ?? [];
  const deliveryStatuses = async (auth: string) =>
    (await events(auth)).filter((e) => e.type.endsWith("delivery_status"));

  /** The answer as a caller sees it: status and JSON body (an empty body stays undefined). */
  const seen = (r: RestAnswer) => ({ status: r.status, body: r.body as Json | undefined });

  it("turns a V1 message's report into its delivery_status event, answering 204 with no body", async () => {
    const { auth, reference } = await sentV1();
    expect(reference).to.equal(`${auth}.1`);
    const res = await report("alpha", { reference, status: "undelivered", error: "EC_SUBSCRIBER_ABSENT" });
    expect([res.status, res.text]).to.deep.equal([204, ""]);
    expect(res.headers.get("content-type")).to.equal(null);
    expect(res.headers.get("x-request-id")).to.be.a("string").and.not.empty;
    const statuses = await deliveryStatuses(auth);
    expect(statuses).to.have.length(1);
    expect(statuses[0]?.payload).to.deep.equal({
      authentication_uuid: auth,
      attempt: 1,
      status: "failed",
      provider_status: "UNDELIVERED",
      error_code: "EC_SUBSCRIBER_ABSENT",
    });
  });

  it("maps delivered and rejected, and leaves error_code out when the report gives none", async () => {
    for (const [status, state] of [
      ["delivered", "delivered"],
      ["rejected", "rejected"],
    ] as const) {
      const { auth, reference } = await sentV1();
      const res = await report("alpha", { reference, status });
      expect(res.status, res.text).to.equal(204);
      const statuses = await deliveryStatuses(auth);
      expect(statuses.map((e) => e.payload)).to.deep.equal([
        { authentication_uuid: auth, attempt: 1, status: state, provider_status: status.toUpperCase() },
      ]);
    }
  });

  it("turns a V2 verification's report into its verify.delivery_status event", async () => {
    const before = alpha.messages.length;
    const phone = freshNumber();
    const created = await rest(app.baseUrl).call("POST", "/v2/verification", {
      body: { target: { type: "phone_number", value: phone } },
      bearer: customer.apiKey,
    });
    expect(created.body.status, created.text).to.equal("success");
    const auth = authUuidOfVerification(String(created.body.id)) ?? "";
    const message = await alpha.message(before);
    expect(message.reference).to.equal(`${auth}.1`);
    const res = await report("alpha", { reference: message.reference, status: "delivered" });
    expect(res.status, res.text).to.equal(204);
    const statuses = await deliveryStatuses(auth);
    expect(statuses.map((e) => [e.type, e.payload.verification_id, e.payload.status])).to.deep.equal([
      ["verify.delivery_status", created.body.id, "delivered"],
    ]);
  });

  it("changes nothing more when the same report comes again", async () => {
    const { auth, reference } = await sentV1();
    const first = await report("alpha", { reference, status: "delivered" });
    expect(first.status).to.equal(204);
    const once = await events(auth);
    const again = await report("alpha", { reference, status: "delivered" });
    expect(again.status).to.equal(204);
    expect(await events(auth)).to.deep.equal(once);
  });

  it("answers 204 to a report naming an unknown reference, and records nothing", async () => {
    const { auth, reference } = await sentV1();
    const before = await events(auth);
    for (const unknown of [`${auth}.7`, "no-such-reference", `${reference}x`]) {
      const res = await report("alpha", { reference: unknown, status: "delivered" });
      expect([res.status, res.text], unknown).to.deep.equal([204, ""]);
    }
    expect(await events(auth)).to.deep.equal(before);
  });

  it("takes a report only from the provider that sent the message", async () => {
    // beta's token is right for beta, but alpha carried the message: beta's report names nothing of beta's.
    const { auth, reference } = await sentV1();
    const before = await events(auth);
    const res = await report("beta", { reference, status: "delivered" }, BETA_TOKEN);
    expect(res.status, res.text).to.equal(204);
    expect(await events(auth)).to.deep.equal(before);
  });

  describe("refusals, which change nothing", () => {
    let sent: { auth: string; reference: string };
    before(async () => {
      sent = await sentV1();
    });
    afterEach(async () => {
      expect(await deliveryStatuses(sent.auth)).to.deep.equal([]);
    });

    it("refuses a missing token with 401 unauthorized and a Bearer challenge", async () => {
      const res = await report("alpha", { reference: sent.reference, status: "delivered" }, null);
      expect(seen(res)).to.deep.equal({
        status: 401,
        body: { code: "unauthorized", message: "Authorization: Bearer <status_token> is required" },
      });
      expect(res.headers.get("www-authenticate")).to.equal('Bearer realm="ringfence"');
    });

    it("refuses a wrong token, another provider's token, or another scheme with 401 unauthorized", async () => {
      const wrong = { code: "unauthorized", message: "the token is not this provider's status_token" };
      for (const token of [`${ALPHA_TOKEN}x`, ALPHA_TOKEN.slice(0, -1), BETA_TOKEN, "short"]) {
        const res = await report("alpha", { reference: sent.reference, status: "delivered" }, token);
        expect(seen(res), token).to.deep.equal({ status: 401, body: wrong });
      }
      const basic = await rest(app.baseUrl).call("POST", "/v1/delivery/status/alpha", {
        body: { reference: sent.reference, status: "delivered" },
        headers: { authorization: `Basic ${ALPHA_TOKEN}` },
      });
      expect(basic.status).to.equal(401);
      expect(basic.body.code).to.equal("unauthorized");
    });

    it("answers 404 not_found for an unknown provider, an http provider without a token and an SMPP one", async () => {
      for (const provider of ["nobody", "plain", "gamma", "default"]) {
        const res = await report(provider, { reference: sent.reference, status: "delivered" });
        expect(seen(res), provider).to.deep.equal({
          status: 404,
          body: { code: "not_found", message: "no provider of this name takes delivery reports" },
        });
      }
    });

    it("refuses a malformed body with 400 bad_request naming the field", async () => {
      const cases: [unknown, string, string][] = [
        [{ status: "delivered" }, "reference", "reference: is required"],
        [{ reference: "", status: "delivered" }, "reference", "reference: is required"],
        [
          { reference: "r".repeat(129), status: "delivered" },
          "reference",
          "reference: must be at most 128 characters",
        ],
        [
          { reference: sent.reference },
          "status",
          'status: must be one of "delivered", "undelivered", "rejected"',
        ],
        [
          { reference: sent.reference, status: "DELIVERED" },
          "status",
          'status: must be one of "delivered", "undelivered", "rejected"',
        ],
        [
          { reference: sent.reference, status: "undeliverable" },
          "status",
          'status: must be one of "delivered", "undelivered", "rejected"',
        ],
        [
          { reference: sent.reference, status: "rejected", error: "e".repeat(65) },
          "error",
          "error: must be at most 64 characters",
        ],
      ];
      for (const [body, field, message] of cases) {
        const res = await report("alpha", body);
        expect(seen(res), JSON.stringify(body)).to.deep.equal({
          status: 400,
          body: { code: "bad_request", message, field },
        });
      }
    });

    it("refuses wrong JSON types and unknown fields with 400 bad_request naming the field", async () => {
      const cases: [unknown, string][] = [
        [{ reference: 5, status: "delivered" }, "reference"],
        [{ reference: sent.reference, status: true }, "status"],
        [{ reference: sent.reference, status: "rejected", error: 17 }, "error"],
        [{ reference: [sent.reference], status: "delivered" }, "reference"],
        [{ reference: sent.reference, status: "delivered", state: "x" }, "state"],
      ];
      for (const [body, field] of cases) {
        const res = await report("alpha", body);
        expect(res.status, JSON.stringify(body)).to.equal(400);
        expect(res.body.code).to.equal("bad_request");
        expect(String(res.body.message), JSON.stringify(body)).to.include(field);
      }
    });

    it("refuses a body that is not a JSON object with 400 bad_request", async () => {
      for (const raw of ["reference=x&status=delivered", "{", '"delivered"', "[1]"]) {
        const res = await rest(app.baseUrl).call("POST", "/v1/delivery/status/alpha", {
          raw,
          bearer: ALPHA_TOKEN,
        });
        expect(res.status, raw).to.equal(400);
        expect(Object.keys(res.body).sort(), raw).to.deep.equal(["code", "message"]);
        expect(res.body.code).to.equal("bad_request");
        expect(String(res.body.message), raw).to.match(/JSON/);
      }
    });

    it("answers a path or method no route takes under /v1/delivery/ with the session body", async () => {
      const other = await rest(app.baseUrl).call("GET", "/v1/delivery/status/alpha", { bearer: ALPHA_TOKEN });
      expect(other.status).to.equal(405);
      expect(other.body).to.deep.include({ code: "method_not_allowed" });
      expect(other.headers.get("allow")).to.equal("POST");
      const deeper = await report("alpha/more", { reference: sent.reference, status: "delivered" });
      expect(deeper.status).to.equal(404);
      expect(Object.keys(deeper.body).sort()).to.deep.equal(["code", "message"]);
      expect(deeper.body.code).to.equal("not_found");
    });
  });
});

/** STATUS_TOKEN_FAILURES_IP: a stranger guessing report tokens is stopped, the provider is not. */
describe("wrong delivery-report tokens per client address (STATUS_TOKEN_FAILURES_IP)", () => {
  let app: TestApp;
  let alpha: SmsReceiver;

  before(async function () {
    this.timeout(30_000);
    alpha = await SmsReceiver.start();
    app = await startTestApp({
      DELIVERY_PROVIDERS: JSON.stringify([{ name: "alpha", url: alpha.url, status_token: ALPHA_TOKEN }]),
      STATUS_TOKEN_FAILURES_IP: "3/60",
    });
  });
  after(async () => {
    await app.stop();
    await alpha.close();
  });

  const report = (provider: string, token: string) =>
    rest(app.baseUrl).call("POST", `/v1/delivery/status/${provider}`, {
      body: { reference: "nothing-sent-with-this", status: "delivered" },
      bearer: token,
    });

  it("answers 429 with Retry-After once an address has used up its window, counts wrong names too, and still serves the right token", async () => {
    const guesses = [
      await report("alpha", "guess-000000000000000001"),
      await report("alpha", "guess-000000000000000002"),
      await report("nobody", "guess-000000000000000003"),
    ];
    expect(guesses.map((g) => g.status)).to.deep.equal([401, 401, 404]);
    const refused = await report("alpha", "guess-000000000000000004");
    expect(refused.status).to.equal(429);
    expect(Number(refused.headers.get("retry-after"))).to.be.within(1, 60);
    // The provider, from the same address, is not locked out by a stranger's guesses.
    expect((await report("alpha", ALPHA_TOKEN)).status).to.equal(204);
    const metrics = await app.registry.metrics.exposition();
    expect(metrics.body).to.match(/ringfence_abuse_refusals_total\{rule="STATUS_TOKEN_FAILURES_IP"\} [1-9]/);
  });
});
