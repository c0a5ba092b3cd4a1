import { expect } from "chai";
import { status as GrpcStatus } from "@grpc/grpc-js";
import { FraudServiceClient } from "../../src/gen/ringfence/verify/v2/fraud_service.js";
import { insecure, metadata, startTestApp, unary, type TestApp } from "../support/app.js";
import { FRAUD_TEST_ENV, FraudCustomer } from "../support/fraud-customer.js";
import { SmsReceiver } from "../support/receivers.js";
import { byKey, judgeAll, syntheticDestination, walkPages } from "../support/fraud-reports.js";
import { sample } from "../support/metrics.js";
import { commandsDuring } from "../support/redis.js";
import { reportReads } from "../../src/fraud/module.js";
import { RingfenceError } from "../../src/errors.js";
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
    // The narrowest destination that explains it is named: the prefix the sends went to.
    expect(String(newest?.detail)).to.match(/^prefix \+336123: 3 sent/);
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
      const listed = await unary(
        client.listFraudDecisions.bind(client),
        { since: "", limit: "1", pageToken: "" },
        auth,
      );
      expect(listed.err).to.equal(null);
      expect(listed.res?.decisions.map((d) => d.phoneNumber)).to.deep.equal(["+3361234**99"]);
      // The older one is on the next page.
      const next = await unary(
        client.listFraudDecisions.bind(client),
        { since: "", limit: "1", pageToken: listed.res?.nextPageToken ?? "" },
        auth,
      );
      expect(next.res?.decisions.map((d) => d.phoneNumber)).to.deep.equal(["+3361234**78"]);
      expect(next.res?.nextPageToken).to.equal(undefined);
      const grouped = await unary(
        client.listVerificationInsights.bind(client),
        { since: "", until: "", groupBy: "prefix", limit: "", pageToken: "" },
        auth,
      );
      expect(grouped.res?.groups.map((g) => [g.key, g.sent, g.blocked])).to.deep.equal([
        ["+336123", 3, 2],
        ["+491512", 1, 0],
      ]);
      const bad = await unary(
        client.listVerificationInsights.bind(client),
        { since: "", until: "", groupBy: "city", limit: "", pageToken: "" },
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

/**
 * The reports a page at a time (docs/fraud.md#pages): tenants filled through the engine's own
 * script (test/support/fraud-reports.ts), read over REST through the real service, with the
 * default REPORTS_LIMIT_ACCOUNT (60 reads a minute per account).
 */
describe("fraud reports, a page at a time", function () {
  this.timeout(60_000);
  let app: TestApp;
  let sms: SmsReceiver;
  const DAY = DAY_MS;

  before(async () => {
    sms = await SmsReceiver.start();
    app = await startTestApp({ SMS_PROVIDER: "http", SMS_HTTP_URL: sms.url, ...FRAUD_TEST_ENV });
  });
  after(async () => {
    await app.stop();
    await sms.close();
  });

  const setPolicy = (tenant: string, ...fields: string[]) =>
    app.registry.redis.hset(app.registry.fraud.keys.policy(tenant), ...fields);

  /**
   * An account with 240 French prefixes sent 1 to 6 times each (many equal counts, so the order
   * among equals shows) and 6 German ones only blocked (geo): the groups by prefix as the API
   * must order them.
   */
  async function filled(): Promise<{ c: FraudCustomer; expected: [string, number, number][] }> {
    const c = await FraudCustomer.create(app, sms);
    await setPolicy(c.uuid, "g:FR", "trust", "g:DE", "block");
    const fr = Array.from({ length: 240 }, (_, i) => ({
      d: syntheticDestination(i),
      times: 1 + ((i * 7919) % 6),
    }));
    const de = Array.from({ length: 6 }, (_, i) => ({ d: syntheticDestination(500 + i, "DE"), times: 1 }));
    expect(new Set(await judgeAll(app.registry.fraud, c.uuid, fr))).to.deep.equal(new Set(["allow"]));
    expect(new Set(await judgeAll(app.registry.fraud, c.uuid, de))).to.deep.equal(new Set(["block"]));
    const expected: [string, number, number][] = [
      ...fr.map(({ d, times }): [string, number, number] => [d.prefix, times, 0]),
      ...de.map(({ d }): [string, number, number] => [d.prefix, 0, 1]),
    ];
    expected.sort((a, b) => b[1] - a[1] || byKey(a[0], b[0]));
    return { c, expected };
  }

  const rows = (groups: unknown) => (groups as Json[]).map((g) => [g.key, g.sent, g.blocked]);

  it("answers 100 groups by default and at most 1000, the most sent first and equals by key", async () => {
    const { c, expected } = await filled();
    const first = await c.get("/v2/insights/verifications?group_by=prefix");
    expect(first.status, first.text).to.equal(200);
    expect(rows(first.body.groups)).to.deep.equal(expected.slice(0, 100));
    expect(first.body.next_page_token)
      .to.be.a("string")
      .and.match(/^[\w-]+\.[\w-]+$/);

    const all = await c.get("/v2/insights/verifications?group_by=prefix&limit=1000");
    expect(all.status, all.text).to.equal(200);
    expect(rows(all.body.groups)).to.deep.equal(expected);
    // The last page says so by leaving the token out.
    expect(all.body).not.to.have.property("next_page_token");
    expect(Object.keys(all.body).sort()).to.deep.equal(["group_by", "groups", "since", "until"]);
  });

  it("walks every group exactly once and in order, page token after page token", async () => {
    const { c, expected } = await filled();
    const pages = await walkPages((p) => c.get(p), "/v2/insights/verifications", "group_by=prefix", 37);
    expect(pages).to.have.length(Math.ceil(expected.length / 37));
    const walked = pages.flatMap((p) => rows(p.groups));
    expect(walked).to.deep.equal(expected);
    expect(new Set(walked.map((r) => r[0])).size).to.equal(expected.length);
    // Every page answers the range of the first.
    expect(
      new Set(pages.map((p) => `${String(p.since)} ${String(p.until)} ${String(p.group_by)}`)).size,
    ).to.equal(1);

    // A group sent to between two pages moves up, above the page asked for: the next page goes on
    // after the last group answered, as it stands.
    const firstPage = await c.get("/v2/insights/verifications?group_by=prefix&limit=50");
    const token = String(firstPage.body.next_page_token);
    const [movedUp] = expected[120] ?? [];
    await judgeAll(app.registry.fraud, c.uuid, [
      { d: syntheticDestination(Number(movedUp?.slice(2))), times: 10 },
    ]);
    const next = await c.get(`/v2/insights/verifications?group_by=prefix&limit=50&page_token=${token}`);
    expect(rows(next.body.groups)).to.deep.equal(expected.slice(50, 100));
    // The last group answered moves up too: the page after it still starts where it was.
    const [cursor] = expected[99] ?? [];
    await judgeAll(app.registry.fraud, c.uuid, [
      { d: syntheticDestination(Number(cursor?.slice(2))), times: 1 },
    ]);
    const third = await c.get(
      `/v2/insights/verifications?group_by=prefix&limit=50&page_token=${String(next.body.next_page_token)}`,
    );
    expect(rows(third.body.groups)).to.deep.equal([...expected.slice(100, 120), ...expected.slice(121, 151)]);
  });

  it("refuses a bad limit or page_token with 400 naming it, and changes nothing", async () => {
    const { c } = await filled();
    const other = await filled();
    const path = "/v2/insights/verifications?group_by=prefix&limit=10";
    const first = await c.get(path);
    const token = String(first.body.next_page_token);
    const second = await c.get(`${path}&page_token=${token}`);
    expect(second.status, second.text).to.equal(200);
    const keys = await app.registry.redis.keys(`${app.config.REDIS_KEY_PREFIX}fraud:{${c.uuid}}:*`);
    const before = await Promise.all(keys.sort().map((k) => app.registry.redis.dump(k)));

    const bad = async (query: string, param: string, names: string) => {
      const res = await c.get(`/v2/insights/verifications?${query}`);
      expect(res.status, res.text).to.equal(400);
      expect(res.body).to.include({ code: "invalid_request", type: "bad_request", param });
      expect(String(res.body.message)).to.include(names);
    };
    for (const limit of ["0", "1001", "ten", "-1", "1e2", "10.5"])
      await bad(`limit=${limit}`, "limit", `"${limit}"`);
    const [body = "", signature = ""] = token.split(".");
    const tampered = Buffer.from(
      Buffer.from(body, "base64url")
        .toString("utf8")
        .replace(/"after":\[(\d+)/, (_m, n: string) => `"after":[${Number(n) + 1}`),
    ).toString("base64url");
    const otherToken = String((await other.c.get(path)).body.next_page_token);
    const decisionsToken = String((await c.get("/v2/fraud/decisions?limit=1")).body.next_page_token);
    for (const t of [
      "nope",
      `${tampered}.${signature}`,
      `${body}.${signature}x`,
      otherToken,
      decisionsToken,
      `${token}.${signature}`,
    ]) {
      await bad(
        `group_by=prefix&limit=10&page_token=${encodeURIComponent(t)}`,
        "page_token",
        "next_page_token",
      );
    }
    // A token is for the query of its first page.
    await bad(`group_by=country&page_token=${token}`, "page_token", "group_by");
    await bad(`since=2026-01-01T00:00:00Z&page_token=${token}`, "page_token", "since");

    // The same page as before, and the account's data as it was.
    const again = await c.get(`${path}&page_token=${token}`);
    expect(again.body).to.deep.equal(second.body);
    const after = await Promise.all(keys.sort().map((k) => app.registry.redis.dump(k)));
    expect(after).to.deep.equal(before);
  });

  it("ranks the default 24 hours and longer ranges by the sends over their whole days", async () => {
    const c = await FraudCustomer.create(app, sms);
    await setPolicy(c.uuid, "g:FR", "trust");
    const today = Math.floor(Date.now() / DAY) * DAY;
    const at = (daysAgo: number) => today - daysAgo * DAY + 3_600_000;
    // Sends per prefix two days ago, yesterday and today.
    const plan: Record<number, [number, number, number]> = {
      0: [9, 0, 0],
      1: [0, 5, 0],
      2: [0, 0, 4],
      3: [0, 2, 2],
      4: [1, 1, 1],
      5: [0, 3, 0],
      6: [4, 0, 1],
    };
    const sends = Object.entries(plan).flatMap(([i, days]) =>
      days.map((times, k) => ({ d: syntheticDestination(Number(i)), times, at: at(2 - k) })),
    );
    await judgeAll(app.registry.fraud, c.uuid, sends);
    const ranked = (days: number[]) =>
      Object.entries(plan)
        .map(([i, counts]): [string, number] => [
          syntheticDestination(Number(i)).prefix,
          days.reduce((sum, k) => sum + (counts[k] ?? 0), 0),
        ])
        .filter(([, sent]) => sent > 0)
        .sort((a, b) => b[1] - a[1] || byKey(a[0], b[0]));
    const sentBy = async (query: string) => {
      const pages = await walkPages(
        (p) => c.get(p),
        "/v2/insights/verifications",
        `group_by=prefix${query}`,
        2,
      );
      return pages.flatMap((p) => (p.groups as Json[]).map((g) => [g.key, g.sent]));
    };
    // The last 24 hours count yesterday and today whole.
    expect(await sentBy("")).to.deep.equal(ranked([1, 2]));
    expect(await sentBy(`&since=${new Date(today).toISOString()}`)).to.deep.equal(ranked([2]));
    expect(await sentBy(`&since=${new Date(at(2)).toISOString()}`)).to.deep.equal(ranked([0, 1, 2]));
    expect(
      await sentBy(`&since=${new Date(at(2)).toISOString()}&until=${new Date(at(1)).toISOString()}`),
    ).to.deep.equal(ranked([0, 1]));
    expect(
      await sentBy(`&since=${new Date(at(2)).toISOString()}&until=${new Date(at(2)).toISOString()}`),
    ).to.deep.equal(ranked([0]));
  });

  it("walks the decisions newest first, each once, with since kept from page to page", async () => {
    const c = await FraudCustomer.create(app, sms);
    await setPolicy(c.uuid, "g:DE", "block");
    for (let i = 0; i < 25; i++) {
      await judgeAll(app.registry.fraud, c.uuid, [{ d: syntheticDestination(i, "DE"), times: 1 }]);
    }
    const ids = (pages: Json[]) => pages.flatMap((p) => (p.decisions as Json[]).map((d) => String(d.id)));
    const walked = ids(await walkPages((p) => c.get(p), "/v2/fraud/decisions", "", 10));
    expect(walked).to.have.length(25);
    expect(new Set(walked).size).to.equal(25);
    const ms = (id: string) => Number(id.split("-")[0]);
    expect(walked.map(ms)).to.deep.equal(walked.map(ms).sort((a, b) => b - a));
    // `since` holds for every page: a walk from the 10th newest decision's millisecond.
    const from = ms(walked[9] ?? "");
    const since = new Date(from).toISOString();
    const recent = ids(await walkPages((p) => c.get(p), "/v2/fraud/decisions", `since=${since}`, 3));
    expect(recent).to.deep.equal(walked.filter((id) => ms(id) >= from));

    const first = await c.get("/v2/fraud/decisions?limit=10");
    const token = String(first.body.next_page_token);
    const bad = async (query: string, param: string) => {
      const res = await c.get(`/v2/fraud/decisions?${query}`);
      expect(res.status, res.text).to.equal(400);
      expect(res.body).to.include({ code: "invalid_request", param });
    };
    await bad(`page_token=${token}x`, "page_token");
    await bad(`since=${since}&page_token=${token}`, "page_token");
    await bad("limit=1001", "limit");
  });

  it("refuses an account's 61st read in a window with 429 and Retry-After, and serves the others", async () => {
    const c = await FraudCustomer.create(app, sms);
    const neighbour = await FraudCustomer.create(app, sms);
    const refusals = async () =>
      sample((await app.registry.metrics.exposition()).body, "ringfence_abuse_refusals_total", {
        rule: "REPORTS_LIMIT_ACCOUNT",
      });
    const refusedBefore = await refusals();
    // Both reports count in one window, pages and bad parameters alike.
    const paths = ["/v2/insights/verifications", "/v2/fraud/decisions", "/v2/insights/verifications?limit=0"];
    const statuses = await Promise.all(
      Array.from({ length: 60 }, async (_, i) => (await c.get(paths[i % 3] ?? "")).status),
    );
    expect(statuses.filter((x) => x === 429)).to.deep.equal([]);
    for (const path of ["/v2/insights/verifications?group_by=prefix", "/v2/fraud/decisions"]) {
      const res = await c.get(path);
      expect(res.status, res.text).to.equal(429);
      expect(res.body).to.include({ code: "too_many_attempts", type: "too_many_requests" });
      expect(res.body.message).to.be.a("string");
      expect(Number(res.headers.get("retry-after"))).to.be.within(1, 60);
    }
    expect(await refusals()).to.equal(refusedBefore + 2);
    // Over gRPC as well: the same window.
    const client = new FraudServiceClient(app.grpcAddress, insecure);
    try {
      const refused = await unary(
        client.listFraudDecisions.bind(client),
        { since: "", limit: "", pageToken: "" },
        metadata({ authorization: `Bearer ${c.key}` }),
      );
      expect(refused.err?.code).to.equal(GrpcStatus.RESOURCE_EXHAUSTED);
    } finally {
      client.close();
    }
    // Another account reads as usual.
    expect((await neighbour.get("/v2/insights/verifications")).status).to.equal(200);
    expect((await neighbour.get("/v2/fraud/decisions")).status).to.equal(200);
  });

  it("refuses an account that keeps reading from memory until Retry-After, with no Redis work", async () => {
    const r = app.registry;
    let clock = Date.now();
    const rule = { limit: 2, windowSeconds: 60 };
    const allow = reportReads({ redis: r.redis, keys: r.keys, rule, now: () => clock });
    const customer = `reads-${Date.now()}`;
    const retryAfter = async (): Promise<number> => {
      try {
        await allow(customer);
      } catch (err) {
        expect(err).to.be.instanceOf(RingfenceError);
        const e = err as RingfenceError;
        expect(e.code).to.equal("too_many_attempts");
        return Number(e.headers["retry-after"]);
      }
      return 0;
    };
    const naming = (seen: string[][]) => seen.filter((args) => args.some((a) => a.includes(customer)));
    let first = 0;
    const asked = await commandsDuring(r.config.REDIS_URL, async () => {
      expect([await retryAfter(), await retryAfter()]).to.deep.equal([0, 0]);
      first = await retryAfter();
    });
    expect(first).to.be.within(59, 60);
    expect(naming(asked)).to.have.length.at.least(3);
    // Refused again and again, counting down, without a command naming the account.
    clock += 30_000;
    let again: number[] = [];
    const remembered = await commandsDuring(r.config.REDIS_URL, async () => {
      again = [await retryAfter(), await retryAfter()];
    });
    expect(again.every((s) => s >= 29 && s <= 31)).to.equal(true, String(again));
    expect(naming(remembered)).to.deep.equal([]);
    // Past Retry-After the window is asked again (here it is still full: the clock above is local).
    clock += 31_000;
    const reasked = await commandsDuring(r.config.REDIS_URL, async () => {
      expect(await retryAfter()).to.be.above(0);
    });
    expect(naming(reasked)).to.have.length.at.least(1);
    // Another instance (its own memory) is refused by the window itself.
    const other = reportReads({ redis: r.redis, keys: r.keys, rule });
    await other(customer).then(
      () => expect.fail("another instance read past the window"),
      (err: unknown) => expect((err as RingfenceError).code).to.equal("too_many_attempts"),
    );
  });
});
