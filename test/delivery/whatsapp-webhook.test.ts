import { expect } from "chai";
import type { DeliveryReceipt } from "../../src/messaging/provider.js";
import {
  GraphFake,
  hubSignature,
  postSigned,
  whatsappEntry,
  type GraphNumber,
} from "../support/graph-fake.js";
import { sample } from "../support/metrics.js";
import { Receiver } from "../support/receivers.js";
import { rest } from "../support/rest.js";
import { startRoutedApp, type RoutedApp } from "../support/routing.js";

const EU: GraphNumber = {
  phoneNumberId: "106540352242922",
  token: "EAAGraphToken-eu-0123456789abcdef",
  appSecret: "app-secret-eu-0123456789abcdef",
  displayPhoneNumber: "15550783881",
};
const BR: GraphNumber = {
  phoneNumberId: "200000000000001",
  token: "EAAGraphToken-br-0123456789abcdef",
  appSecret: "app-secret-br-0123456789abcdef",
  displayPhoneNumber: "5511999990000",
};
const VERIFY_EU = "verify-token-eu-0123456789";
const VERIFY_BR = "verify-token-br-0123456789";
const VOICE_TOKEN = "voice-status-token-0123456789";

/** A DELIVERY_PROVIDERS entry of `number` at `graph`. */
const entry = (name: string, graph: GraphFake, number: GraphNumber, verifyToken: string) =>
  whatsappEntry(name, graph, number, verifyToken);

/**
 * docs/routing.md#whatsapp: the WhatsApp webhook of the whole service over REST, with Meta's side
 * played by a Graph fake: the handshake, and signed statuses of the messages the providers sent,
 * which reach the delivery-report listeners as receipts.
 */
describe("WhatsApp webhook (/v1/whatsapp/webhook)", () => {
  let app: RoutedApp;
  let graph: GraphFake;
  let voice: Receiver;
  /** What the listeners heard, in order: provider and receipt. */
  const heard: { provider: string; receipt: DeliveryReceipt }[] = [];

  before(async function () {
    this.timeout(30_000);
    graph = await GraphFake.start([EU, BR]);
    voice = await Receiver.start();
    app = await startRoutedApp({
      DELIVERY_PROVIDERS: JSON.stringify([
        { name: "sms", url: voice.url },
        entry("wa-eu", graph, EU, VERIFY_EU),
        entry("wa-br", graph, BR, VERIFY_BR),
        { name: "call", channel: "voice", url: voice.url, status_token: VOICE_TOKEN },
      ]),
      STATUS_TOKEN_FAILURES_IP: "off",
    });
    app.onReport((provider, receipt) => {
      heard.push({ provider, receipt });
      return Promise.resolve();
    });
  });
  after(async () => {
    await app.stop();
    await Promise.all([graph.close(), voice.close()]);
  });
  beforeEach(() => {
    heard.length = 0;
  });

  /** Sends a code through provider `name` of the app, as the engine does: the wamid Graph answered. */
  async function sent(name: string, to = "+33612345678"): Promise<string> {
    const provider = app.router.provider(name);
    if (provider === undefined) throw new Error(`no provider ${name}`);
    const { providerId } = await provider.send({
      to,
      from: "Ringfence",
      body: "Your code is 482913",
      locale: "en-US",
      reference: `ref-${Date.now()}`,
      code: "482913",
    });
    return providerId;
  }

  const handshake = (query: string) => fetch(`${app.baseUrl}/v1/whatsapp/webhook?${query}`);

  describe("the subscription handshake", () => {
    it("answers the challenge as plain text to the verify_token of either entry", async () => {
      for (const token of [VERIFY_EU, VERIFY_BR]) {
        const res = await handshake(`hub.mode=subscribe&hub.verify_token=${token}&hub.challenge=1158201444`);
        expect(res.status).to.equal(200);
        expect(res.headers.get("content-type")).to.equal("text/plain; charset=utf-8");
        expect(res.headers.get("x-content-type-options")).to.equal("nosniff");
        expect(await res.text()).to.equal("1158201444");
      }
    });

    it("answers 403 forbidden to a verify_token no entry has", async () => {
      for (const token of [`${VERIFY_EU}x`, "nothing", encodeURIComponent(EU.appSecret)]) {
        const res = await handshake(`hub.mode=subscribe&hub.verify_token=${token}&hub.challenge=1158201444`);
        expect([res.status, await res.json()], token).to.deep.equal([
          403,
          { code: "forbidden", message: "hub.verify_token is not the verify_token of a WhatsApp provider" },
        ]);
      }
    });

    it("answers 400 to a mode other than subscribe, or a parameter missing", async () => {
      const cases: [string, string, string][] = [
        [
          `hub.mode=unsubscribe&hub.verify_token=${VERIFY_EU}&hub.challenge=1`,
          "hub.mode",
          "hub.mode: must be subscribe",
        ],
        [`hub.verify_token=${VERIFY_EU}&hub.challenge=1`, "hub.mode", "hub.mode: is required"],
        [`hub.mode=subscribe&hub.challenge=1`, "hub.verify_token", "hub.verify_token: is required"],
        [`hub.mode=subscribe&hub.verify_token=${VERIFY_EU}`, "hub.challenge", "hub.challenge: is required"],
        ["", "hub.mode", "hub.mode: is required"],
      ];
      for (const [query, field, message] of cases) {
        const res = await handshake(query);
        expect([res.status, await res.json()], query).to.deep.equal([
          400,
          { code: "bad_request", message, field },
        ]);
      }
    });
  });

  describe("statuses", () => {
    it("gives each status of a signed notification to the listeners as the receipt of the message", async () => {
      const wamid = await sent("wa-eu");
      const states: ["sent" | "delivered" | "read", string][] = [
        ["sent", "accepted"],
        ["delivered", "delivered"],
        ["read", "delivered"],
      ];
      for (const [status] of states) {
        const res = await graph.deliver(app.baseUrl, wamid, status);
        expect([res.status, await res.json()], status).to.deep.equal([200, {}]);
      }
      expect(
        heard.map((h) => [h.provider, h.receipt.providerId, h.receipt.state, h.receipt.providerStatus]),
      ).to.deep.equal(states.map(([status, state]) => ["wa-eu", wamid, state, status.toUpperCase()]));
      for (const { receipt } of heard) {
        expect(receipt).to.not.have.property("errorCode");
        expect(Date.parse(receipt.at)).to.be.closeTo(Date.now(), 10_000);
      }
      const metrics = await app.metrics();
      expect(
        sample(metrics, "ringfence_whatsapp_statuses_total", { provider: "wa-eu", status: "read" }),
      ).to.equal(1);
    });

    it("takes a failed status as a failed receipt with Meta's error code", async () => {
      const wamid = await sent("wa-eu");
      const res = await graph.deliver(app.baseUrl, wamid, "failed");
      expect(res.status).to.equal(200);
      expect(heard.map((h) => h.receipt)).to.deep.equal([
        {
          providerId: wamid,
          state: "failed",
          providerStatus: "FAILED",
          errorCode: "131026",
          at: heard[0]?.receipt.at,
        },
      ]);
    });

    it("finds each notification's entry by its phone_number_id, and checks it with that entry's app_secret", async () => {
      const eu = await sent("wa-eu");
      const br = await sent("wa-br", "+5511987654321");
      expect((await graph.deliver(app.baseUrl, br, "delivered")).status).to.equal(200);
      expect((await graph.deliver(app.baseUrl, eu, "delivered")).status).to.equal(200);
      expect(heard.map((h) => [h.provider, h.receipt.providerId])).to.deep.equal([
        ["wa-br", br],
        ["wa-eu", eu],
      ]);
      // BR's number signed with EU's secret: refused, nothing recorded.
      heard.length = 0;
      const crossed = await graph.deliver(app.baseUrl, br, "read", EU.appSecret);
      expect([crossed.status, await crossed.json()]).to.deep.equal([
        401,
        {
          code: "unauthorized",
          message:
            "X-Hub-Signature-256 is not the HMAC-SHA256 of the body with the app secret of its phone number",
        },
      ]);
      expect(heard).to.deep.equal([]);
    });

    it("answers 401 to a missing or wrong signature, and records nothing", async () => {
      const wamid = await sent("wa-eu");
      const raw = JSON.stringify(graph.notification(wamid, "delivered"));
      const missing = await postSigned(app.baseUrl, raw, null);
      expect([missing.status, await missing.json()]).to.deep.equal([
        401,
        {
          code: "unauthorized",
          message: "X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body with the app secret> is required",
        },
      ]);
      const right = hubSignature(raw, EU.appSecret);
      const wrongs = [
        hubSignature(raw, "another-app-secret-0123456789"),
        hubSignature(`${raw} `, EU.appSecret),
        `${right.slice(0, -1)}${right.endsWith("0") ? "1" : "0"}`,
        right.replace("sha256=", "sha1="),
        right.slice(0, -2),
        "",
      ];
      for (const signature of wrongs) {
        const res = await fetch(`${app.baseUrl}/v1/whatsapp/webhook`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-hub-signature-256": signature },
          body: raw,
        });
        expect(res.status, signature).to.equal(401);
        expect(((await res.json()) as { code: string }).code).to.equal("unauthorized");
      }
      expect(heard).to.deep.equal([]);
      // The same bytes, rightly signed, are taken.
      const res = await fetch(`${app.baseUrl}/v1/whatsapp/webhook`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-hub-signature-256": right.toUpperCase().replace("SHA256=", "sha256="),
        },
        body: raw,
      });
      expect(res.status).to.equal(200);
      expect(heard.map((h) => h.receipt.state)).to.deep.equal(["delivered"]);
    });

    it("answers 200 and records nothing for inbound messages, template events and numbers of no entry", async () => {
      const inbound = {
        object: "whatsapp_business_account",
        entry: [
          {
            id: "102290129340398",
            changes: [
              {
                value: {
                  messaging_product: "whatsapp",
                  metadata: {
                    display_phone_number: EU.displayPhoneNumber,
                    phone_number_id: EU.phoneNumberId,
                  },
                  contacts: [{ profile: { name: "Kerry Fisher" }, wa_id: "33612345678" }],
                  messages: [
                    {
                      from: "33612345678",
                      id: "wamid.inbound",
                      timestamp: "1700000000",
                      type: "text",
                      text: { body: "hi" },
                    },
                  ],
                },
                field: "messages",
              },
            ],
          },
        ],
      };
      const template = {
        object: "whatsapp_business_account",
        entry: [
          {
            id: "102290129340398",
            changes: [
              {
                value: {
                  event: "APPROVED",
                  message_template_id: 1,
                  message_template_name: "verification_code",
                },
                field: "message_template_status_update",
              },
            ],
          },
        ],
      };
      const elsewhere = JSON.parse(JSON.stringify(graph.notification(await sent("wa-eu"), "delivered"))) as {
        entry: { changes: { value: { metadata: { phone_number_id: string } } }[] }[];
      };
      const change = elsewhere.entry[0]?.changes[0];
      if (change !== undefined) change.value.metadata.phone_number_id = "300000000000009";
      for (const [what, body, secret] of [
        ["inbound", inbound, EU.appSecret],
        ["template", template, EU.appSecret],
        ["another number, unsigned by us", elsewhere, "someone-elses-secret-0123456789"],
      ] as const) {
        const res = await postSigned(app.baseUrl, JSON.stringify(body), secret);
        expect([res.status, await res.json()], what).to.deep.equal([200, {}]);
      }
      expect(heard).to.deep.equal([]);
    });

    it("answers 400 naming what is wrong with a body that is not JSON or not Meta's shape, and records nothing", async () => {
      const cases: [string, Record<string, string>][] = [
        ["{not json", { code: "bad_request", message: "the body is not JSON" }],
        ["[1]", { code: "bad_request", message: "the body must be a JSON object" }],
        [
          JSON.stringify({ object: "whatsapp_business_account" }),
          { code: "bad_request", message: "entry: is required", field: "entry" },
        ],
        [
          JSON.stringify({
            object: "whatsapp_business_account",
            entry: [{ changes: [{ field: "messages", value: {} }] }],
          }),
          {
            code: "bad_request",
            message: "entry.0.changes.0.value.metadata: is required",
            field: "entry.0.changes.0.value.metadata",
          },
        ],
        [
          JSON.stringify({
            object: "whatsapp_business_account",
            entry: [
              {
                changes: [
                  {
                    field: "messages",
                    value: {
                      metadata: { phone_number_id: EU.phoneNumberId },
                      statuses: [{ status: "delivered" }],
                    },
                  },
                ],
              },
            ],
          }),
          {
            code: "bad_request",
            message: "entry.0.changes.0.value.statuses.0.id: is required",
            field: "entry.0.changes.0.value.statuses.0.id",
          },
        ],
      ];
      for (const [raw, answer] of cases) {
        const res = await postSigned(app.baseUrl, raw, EU.appSecret);
        expect([res.status, await res.json()], raw).to.deep.equal([400, answer]);
      }
      expect(heard).to.deep.equal([]);
    });

    it("answers a path or method no route takes under /v1/whatsapp/ with the session body", async () => {
      const res = await rest(app.baseUrl).call("PUT", "/v1/whatsapp/webhook", { body: {} });
      expect(res.status).to.equal(405);
      expect(res.body).to.deep.include({ code: "method_not_allowed" });
      expect(res.headers.get("allow")).to.equal("GET, POST");
      const deeper = await rest(app.baseUrl).call("GET", "/v1/whatsapp/webhook/more");
      expect([deeper.status, Object.keys(deeper.body).sort()]).to.deep.equal([404, ["code", "message"]]);
      expect(deeper.body.code).to.equal("not_found");
    });
  });

  describe("a voice provider's delivery reports", () => {
    it("are taken with its own status_token, as an http SMS provider's are, and reach the same listeners", async () => {
      const report = (token: string) =>
        rest(app.baseUrl).call("POST", "/v1/delivery/status/call", {
          body: { reference: "auth-uuid.1", status: "undelivered", error: "NO_ANSWER" },
          bearer: token,
        });
      const res = await report(VOICE_TOKEN);
      expect([res.status, res.text]).to.deep.equal([204, ""]);
      expect(
        heard.map((h) => [h.provider, h.receipt.providerId, h.receipt.state, h.receipt.errorCode]),
      ).to.deep.equal([["call", "auth-uuid.1", "failed", "NO_ANSWER"]]);
      expect((await report(`${VOICE_TOKEN}x`)).status).to.equal(401);
    });

    it("are not taken for a WhatsApp provider, whose statuses come on the webhook", async () => {
      const res = await rest(app.baseUrl).call("POST", "/v1/delivery/status/wa-eu", {
        body: { reference: "x", status: "delivered" },
        bearer: VERIFY_EU,
      });
      expect(res.status).to.equal(404);
      expect(heard).to.deep.equal([]);
    });
  });
});

/** STATUS_TOKEN_FAILURES_IP counts wrong signatures and verify tokens too. */
describe("wrong WhatsApp webhook signatures and verify tokens per client address (STATUS_TOKEN_FAILURES_IP)", () => {
  let app: RoutedApp;
  let graph: GraphFake;

  before(async function () {
    this.timeout(30_000);
    graph = await GraphFake.start([EU]);
    app = await startRoutedApp({
      DELIVERY_PROVIDERS: JSON.stringify([entry("wa-eu", graph, EU, VERIFY_EU)]),
      STATUS_TOKEN_FAILURES_IP: "3/60",
    });
  });
  after(async () => {
    await app.stop();
    await graph.close();
  });

  it("answers 429 with Retry-After once an address has used up its window, and still serves Meta's right signature", async () => {
    const provider = app.router.provider("wa-eu");
    const { providerId } = (await provider?.send({
      to: "+33612345678",
      from: "Ringfence",
      body: "Your code is 482913",
      locale: "en-US",
      reference: "ref-limit",
      code: "482913",
    })) ?? { providerId: "" };
    const wrongs = [
      await graph.deliver(app.baseUrl, providerId, "delivered", "guess-secret-000000000001"),
      await fetch(
        `${app.baseUrl}/v1/whatsapp/webhook?hub.mode=subscribe&hub.verify_token=guess-0002&hub.challenge=1`,
      ),
      await graph.deliver(app.baseUrl, providerId, "delivered", null),
    ];
    expect(wrongs.map((w) => w.status)).to.deep.equal([401, 403, 401]);
    const refused = await graph.deliver(app.baseUrl, providerId, "delivered", "guess-secret-000000000004");
    expect(refused.status).to.equal(429);
    expect(Number(refused.headers.get("retry-after"))).to.be.within(1, 60);
    expect(((await refused.json()) as { message: string }).message).to.equal(
      "too many wrong WhatsApp webhook signatures or verify tokens from this address; try again later",
    );
    expect((await graph.deliver(app.baseUrl, providerId, "delivered")).status).to.equal(200);
    const metrics = await app.metrics();
    expect(metrics).to.match(/ringfence_abuse_refusals_total\{rule="STATUS_TOKEN_FAILURES_IP"\} [1-9]/);
  });
});
