import { expect } from "chai";
import { status as GrpcStatus } from "@grpc/grpc-js";
import { FraudServiceClient } from "../../src/gen/ringfence/verify/v2/fraud_service.js";
import { insecure, metadata, startTestApp, unary, type TestApp } from "../support/app.js";
import { FRAUD_TEST_ENV, FraudCustomer } from "../support/fraud-customer.js";
import { SmsReceiver } from "../support/receivers.js";
import { rest, type Json } from "../support/rest.js";

const DAY_MS = 86_400_000;

/**
 * GET /v2/insights/verifications and GET /v2/fraud/decisions over REST through the real service
 * (docs/fraud.md#insights): after sends, right codes and blocks, with 3 sends per destination and
 * hour (FRAUD_NEW_DESTINATION_SENDS=3).
 */
describe("fraud insights and decisions (V2 API)", function () {
  this.timeout(30_000);
  let app: TestApp;
  let sms: SmsReceiver;
  let c: FraudCustomer;
  // French mobiles under one prefix, +336123, each in a SPAM_RANGE_BURST range of its own.
  const sent = ["+33612340101", "+33612341202", "+33612342303"];
  const blocked = ["+33612345678", "+33612346699"];
  const de = "+4915123456789";

  before(async () => {
    sms = await SmsReceiver.start();
    app = await startTestApp({ SMS_PROVIDER: "http", SMS_HTTP_URL: sms.url, ...FRAUD_TEST_ENV });
    c = await FraudCustomer.create(app, sms);
    for (const p of sent) expect((await c.v2(p)).status).to.equal("success");
    expect((await c.v1(blocked[0] ?? "")).status).to.equal("spam_detected");
    expect((await c.v2(blocked[1] ?? "")).status).to.equal("blocked");
    expect((await c.v2(de)).status).to.equal("success");
    // Two of the three French codes are entered.
    expect(await c.verify(sent[0] ?? "")).to.equal("success");
    expect(await c.verify(sent[1] ?? "")).to.equal("success");
  });
  after(async () => {
    await app.stop();
    await sms.close();
  });

  async function insights(query: string): Promise<Json> {
    const res = await c.get(`/v2/insights/verifications${query}`);
    expect(res.status, res.text).to.equal(200);
    return res.body;
  }

  it("counts sent, verified, conversion_rate and blocked by country over the last 24 hours", async () => {
    const now = Date.now();
    const body = await insights("");
    expect(body.group_by).to.equal("country");
    expect(Date.parse(String(body.until))).to.be.within(now - 5_000, now + 5_000);
    expect(Date.parse(String(body.until)) - Date.parse(String(body.since))).to.equal(DAY_MS);
    expect(body.groups).to.deep.equal([
      { key: "FR", sent: 3, verified: 2, conversion_rate: 2 / 3, blocked: 2 },
      { key: "DE", sent: 1, verified: 0, conversion_rate: 0, blocked: 0 },
    ]);
    expect(await insights("?group_by=country")).to.deep.include({ groups: body.groups });
  });

  it("groups by prefix and by network", async () => {
    const byPrefix = await insights("?group_by=prefix");
    expect(byPrefix.group_by).to.equal("prefix");
    expect(byPrefix.groups).to.deep.equal([
      { key: "+336123", sent: 3, verified: 2, conversion_rate: 2 / 3, blocked: 2 },
      { key: "+491512", sent: 1, verified: 0, conversion_rate: 0, blocked: 0 },
    ]);
    // Networks as the lookup knows them: MCC and MNC, else the carrier's name.
    expect((await insights("?group_by=network")).groups).to.deep.equal([
      { key: "208-09", sent: 3, verified: 2, conversion_rate: 2 / 3, blocked: 2 },
      { key: "t-mobile", sent: 1, verified: 0, conversion_rate: 0, blocked: 0 },
    ]);
  });

  it("counts every UTC day a range touches, and nothing before it", async () => {
    const today = Math.floor(Date.now() / DAY_MS) * DAY_MS;
    // The last second of today: the whole day counts.
    const late = new Date(today + DAY_MS - 1000).toISOString();
    const body = await insights(`?since=${late}&until=${late}`);
    expect((body.groups as Json[]).map((g) => [g.key, g.sent])).to.deep.equal([
      ["FR", 3],
      ["DE", 1],
    ]);
    const yesterday = new Date(today - 1).toISOString();
    expect((await insights(`?until=${yesterday}`)).groups).to.deep.equal([]);
  });

  it("prunes index members whose counters are gone", async () => {
    const other = await FraudCustomer.create(app, sms);
    const phone = "+34612340101";
    expect((await other.v2(phone)).status).to.equal("success");
    const keys = app.registry.fraud.keys;
    await app.registry.redis.del(keys.counters(other.uuid, "c:ES"));
    const res = await other.get("/v2/insights/verifications");
    expect(res.body.groups).to.deep.equal([]);
    const members = await app.registry.redis.zrange(keys.index(other.uuid), "0", "-1");
    expect(members).not.to.include("c:ES");
    expect(members).to.include("p:+346123");
  });

  it("lists decisions newest first, numbers masked, with limit and since", async () => {
    const res = await c.get("/v2/fraud/decisions");
    expect(res.status, res.text).to.equal(200);
    const decisions = res.body.decisions as Json[];
    expect(decisions.map((d) => [d.phone_number, d.api, d.action, d.rule])).to.deep.equal([
      ["+3361234**99", "v2", "block", "destination_surge"],
      ["+3361234**78", "v1", "block", "destination_surge"],
    ]);
    const [newest] = decisions;
    expect(Object.keys(newest ?? {}).sort()).to.have.members(
      ["id", "created_at", "api", "country", "prefix", "phone_number", "action", "rule", "detail"].concat(
        newest?.network === undefined ? [] : ["network"],
      ),
    );
    expect(newest).to.include({ country: "FR", prefix: "+336123" });
    expect(newest?.id).to.match(/^\d+-\d+$/);
    expect(newest?.created_at).to.match(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(
      Math.abs(Date.parse(String(newest?.created_at)) - Number(String(newest?.id).split("-")[0])),
    ).to.be.below(5_000);
    expect(String(newest?.detail)).to.match(/^country FR: 3 sent/);
    // Numbers are stored masked: the full number is nowhere in the stream.
    const raw = JSON.stringify(
      await app.registry.redis.xrange(app.registry.fraud.keys.decisions(c.uuid), "-", "+"),
    );
    for (const p of blocked) expect(raw).not.to.include(p);

    const one = await c.get("/v2/fraud/decisions?limit=1");
    expect((one.body.decisions as Json[]).map((d) => d.id)).to.deep.equal([newest?.id]);
    const future = new Date(Date.now() + 60_000).toISOString();
    expect((await c.get(`/v2/fraud/decisions?since=${future}`)).body).to.deep.equal({ decisions: [] });
    const since = String(decisions[0]?.created_at);
    const fromNewest = await c.get(`/v2/fraud/decisions?since=${since}`);
    expect((fromNewest.body.decisions as Json[]).map((d) => d.id)).to.deep.equal([newest?.id]);
  });

  it("answers a bad parameter with 400 invalid_request naming it, and nobody without the key", async () => {
    const bad = async (path: string, param: string, names: string) => {
      const res = await c.get(path);
      expect(res.status, res.text).to.equal(400);
      expect(res.body).to.include({ code: "invalid_request", type: "bad_request", param });
      expect(String(res.body.message)).to.include(names);
      expect(res.body.request_id).to.be.a("string");
    };
    await bad("/v2/insights/verifications?group_by=city", "group_by", '"city"');
    await bad("/v2/insights/verifications?since=yesterday", "since", '"yesterday"');
    await bad("/v2/insights/verifications?until=2026-13-01T00:00:00Z", "until", "2026-13-01");
    await bad(
      "/v2/insights/verifications?since=2026-01-03T00:00:00Z&until=2026-01-02T00:00:00Z",
      "since",
      "after until",
    );
    await bad("/v2/fraud/decisions?since=1700000000", "since", '"1700000000"');
    await bad("/v2/fraud/decisions?limit=0", "limit", '"0"');
    await bad("/v2/fraud/decisions?limit=ten", "limit", '"ten"');
    await bad("/v2/fraud/decisions?limit=1001", "limit", '"1001"');

    for (const path of ["/v2/insights/verifications", "/v2/fraud/decisions"]) {
      const anonymous = await rest(app.baseUrl).get(path);
      expect(anonymous.status).to.equal(401);
      expect(anonymous.body).to.include({ code: "invalid_api_key" });
    }
  });

  it("answers the same over gRPC, with the key as bearer metadata", async () => {
    const client = new FraudServiceClient(app.grpcAddress, insecure);
    const auth = metadata({ authorization: `Bearer ${c.key}` });
    try {
      const listed = await unary(client.listFraudDecisions.bind(client), { since: "", limit: "1" }, auth);
      expect(listed.err).to.equal(null);
      expect(listed.res?.decisions.map((d) => d.phoneNumber)).to.deep.equal(["+3361234**99"]);
      const grouped = await unary(
        client.listVerificationInsights.bind(client),
        { since: "", until: "", groupBy: "prefix" },
        auth,
      );
      expect(grouped.res?.groups.map((g) => [g.key, g.sent, g.blocked])).to.deep.equal([
        ["+336123", 3, 2],
        ["+491512", 1, 0],
      ]);
      const bad = await unary(
        client.listVerificationInsights.bind(client),
        { since: "", until: "", groupBy: "city" },
        auth,
      );
      expect(bad.err?.code).to.equal(GrpcStatus.INVALID_ARGUMENT);
      expect(bad.err?.details).to.include("group_by");
    } finally {
      client.close();
    }
  });

  it("shows each account its own traffic only", async () => {
    const other = await FraudCustomer.create(app, sms);
    expect((await other.get("/v2/insights/verifications")).body.groups).to.deep.equal([]);
    expect((await other.get("/v2/fraud/decisions")).body).to.deep.equal({ decisions: [] });
  });
});
