import { expect } from "chai";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";
import { z } from "zod";
import { LookupServiceClient } from "../../src/gen/ringfence/lookup/v1/lookup_service.js";
import { cliEnv, insecure, metadata, runCli, startTestApp, unary, type TestApp } from "../support/app.js";
import { FraudCustomer } from "../support/fraud-customer.js";
import { SmsReceiver } from "../support/receivers.js";
import { testPort } from "../support/ports.js";
import { waitFor } from "../support/redis.js";
import { basicAuth, rest } from "../support/rest.js";

/**
 * The operator kit (deploy/, docs/operations.md#alerts): the rules pass promtool, and a real
 * Prometheus scraping a running service evaluates every recording rule and dashboard query.
 */

const REPO = fileURLToPath(new URL("../..", import.meta.url));
const RULES = join(REPO, "deploy", "prometheus", "rules.yml");
const RULE_TESTS = join(REPO, "deploy", "prometheus", "rules.test.yml");
const DASHBOARD = join(REPO, "deploy", "grafana", "ringfence.json");
const OPERATIONS = join(REPO, "docs", "operations.md");
const JOB = "ringfence";

const RuleFile = z.object({
  groups: z.array(
    z.object({
      name: z.string(),
      rules: z.array(
        z.union([
          z.object({ record: z.string(), expr: z.string() }).strict(),
          z
            .object({
              alert: z.string(),
              expr: z.string(),
              for: z.string().optional(),
              labels: z.object({ severity: z.enum(["critical", "warning"]) }),
              annotations: z.object({
                summary: z.string(),
                description: z.string(),
                runbook_url: z.string(),
              }),
            })
            .strict(),
        ]),
      ),
    }),
  ),
});

const RuleTests = z.object({
  tests: z.array(
    z.object({
      alert_rule_test: z
        .array(z.object({ alertname: z.string(), exp_alerts: z.array(z.unknown()) }))
        .optional(),
    }),
  ),
});

const PROMETHEUS_DS = { type: "prometheus", uid: "${datasource}" } as const;
const GridPos = z.object({
  h: z.number().int().positive(),
  w: z.number().int().min(1).max(24),
  x: z.number().int().min(0),
  y: z.number().int().min(0),
});
const Panel = z.discriminatedUnion("type", [
  z.object({ type: z.literal("row"), id: z.number().int(), title: z.string(), gridPos: GridPos }),
  z.object({
    type: z.enum(["timeseries", "stat", "gauge", "table", "bargauge"]),
    id: z.number().int(),
    title: z.string().min(1),
    gridPos: GridPos,
    datasource: z.object({ type: z.literal("prometheus"), uid: z.literal("${datasource}") }),
    targets: z
      .array(
        z.object({
          refId: z.string(),
          expr: z.string().min(1),
          datasource: z.object({ type: z.literal("prometheus"), uid: z.literal("${datasource}") }),
        }),
      )
      .min(1),
  }),
]);
const Dashboard = z.object({
  title: z.string(),
  uid: z.string().min(1),
  schemaVersion: z.number().int().min(30),
  panels: z.array(Panel).min(1),
  templating: z.object({
    list: z.array(
      z.object({
        name: z.string(),
        type: z.string(),
        query: z.union([z.string(), z.object({ query: z.string() })]).optional(),
        datasource: z.object({ type: z.string(), uid: z.string() }).optional(),
      }),
    ),
  }),
});
type DataPanel = Exclude<z.infer<typeof Panel>, { type: "row" }>;

const rules = RuleFile.parse(parse(readFileSync(RULES, "utf8")));
const recordings = rules.groups.flatMap((g) => g.rules).filter((r) => "record" in r);
const alerts = rules.groups.flatMap((g) => g.rules).filter((r) => "alert" in r);
const dashboard = Dashboard.parse(JSON.parse(readFileSync(DASHBOARD, "utf8")));

/** Each data panel with the title of the row it sits under. */
function dataPanels(): { row: string; panel: DataPanel }[] {
  let row = "";
  const out: { row: string; panel: DataPanel }[] = [];
  for (const p of dashboard.panels) {
    if (p.type === "row") row = p.title;
    else out.push({ row, panel: p });
  }
  return out;
}

/** Rows whose every panel must show data once the test's traffic has been scraped. */
const TRAFFIC_ROWS = ["Traffic and errors", "Latency", "Token issuance"];

/** A query as Grafana sends it: variables replaced by what this test's Prometheus holds. */
function substituted(expr: string): string {
  const values: Record<string, string> = { __rate_interval: "1m", job: JOB, instance: ".*" };
  const out = expr.replace(/\$\{(\w+)\}|\$(\w+)/g, (all, braced?: string, bare?: string) => {
    const name = braced ?? bare ?? "";
    const value = values[name];
    if (value === undefined) throw new Error(`unknown variable ${all} in ${expr}`);
    return value;
  });
  return out;
}

/** GitHub's anchor for a Markdown heading. */
function slug(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^\w\- ]/g, "")
    .replace(/ /g, "-");
}

/** The metric names an expression reads (not recorded names, which carry colons). */
function metricNames(expr: string): string[] {
  return [...expr.matchAll(/(?<![\w:])((?:ringfence|process|nodejs)_[a-z0-9_]+)(?![\w:])/g)].map(
    (m) => m[1]!,
  );
}

function promtool(...args: string[]): { status: number | null; output: string } {
  const run = spawnSync("promtool", args, { cwd: REPO, encoding: "utf8" });
  if (run.error)
    throw new Error(`promtool is not on PATH (apt-get install prometheus): ${run.error.message}`);
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

describe("deploy/prometheus/rules.yml", () => {
  it("passes promtool check rules", () => {
    const { status, output } = promtool("check", "rules", RULES);
    expect(status, output).to.equal(0);
    expect(output).to.match(/SUCCESS: \d+ rules found/);
  });

  it("passes its promtool unit tests, which see every alert fire and stay quiet", () => {
    const { status, output } = promtool("test", "rules", RULE_TESTS);
    expect(status, output).to.equal(0);
    expect(output).to.match(/SUCCESS/);
    const cases = RuleTests.parse(parse(readFileSync(RULE_TESTS, "utf8"))).tests.flatMap(
      (t) => t.alert_rule_test ?? [],
    );
    for (const { alert } of alerts) {
      const mine = cases.filter((c) => c.alertname === alert);
      expect(
        mine.some((c) => c.exp_alerts.length > 0),
        `${alert} is seen firing`,
      ).to.equal(true);
      expect(
        mine.some((c) => c.exp_alerts.length === 0),
        `${alert} is seen quiet`,
      ).to.equal(true);
    }
  });

  it("has the ten alerts of the operator kit, each with a severity and a runbook section in docs/operations.md", () => {
    expect(alerts.map((a) => a.alert).sort()).to.deep.equal(
      [
        "RingfenceBalanceExhausted",
        "RingfenceConversionDrop",
        "RingfenceErrorRatioHigh",
        "RingfenceFraudBlockSurge",
        "RingfenceLatencyP99High",
        "RingfenceProviderDeliveryRateDrop",
        "RingfenceProviderUnavailable",
        "RingfenceRedisUnreachable",
        "RingfenceSmsFailures",
        "RingfenceWebhookBacklogGrowing",
      ].sort(),
    );
    const anchors = new Set(
      [...readFileSync(OPERATIONS, "utf8").matchAll(/^#{2,4} (.+)$/gm)].map((m) => slug(m[1]!)),
    );
    for (const a of alerts) {
      const anchor = /^https:\/\/docs\.ringfence\.dev\/operations#([\w-]+)$/.exec(
        a.annotations.runbook_url,
      )?.[1];
      expect(anchor, `${a.alert} runbook_url`).to.be.a("string");
      expect(anchors.has(anchor!), `docs/operations.md has a section #${anchor}`).to.equal(true);
    }
  });

  it("reads server errors by outcome, so that bad input cannot raise the error ratio", () => {
    const ratio = recordings.find((r) => r.record === "job:ringfence_requests_server_errors:ratio_rate5m");
    expect(ratio?.expr).to.include('outcome="server_error"');
  });
});

describe("deploy/grafana/ringfence.json", () => {
  it("is a Grafana dashboard model: unique panel ids, panels on the 24-column grid", () => {
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size, "panel ids are unique").to.equal(ids.length);
    for (const p of dashboard.panels) expect(p.gridPos.x + p.gridPos.w, p.title).to.be.at.most(24);
  });

  it("asks for a Prometheus data source, and every panel queries it", () => {
    const variable = dashboard.templating.list.find((v) => v.name === "datasource");
    expect(variable).to.deep.include({ type: "datasource", query: "prometheus" });
    for (const v of dashboard.templating.list.filter((t) => t.type === "query"))
      expect(v.datasource, v.name).to.deep.equal(PROMETHEUS_DS);
    expect(dataPanels().length).to.be.at.least(20);
  });

  it("covers traffic, latency, SMS, conversion and fraud, webhooks, Redis and tokens", () => {
    const rows = dashboard.panels.filter((p) => p.type === "row").map((p) => p.title);
    expect(rows).to.include.members([
      "Traffic and errors",
      "Latency",
      "SMS and email",
      "Conversion and fraud",
      "Webhooks",
      "Redis",
      "Token issuance",
    ]);
  });
});

interface QueryAnswer {
  status: "success" | "error";
  error?: string;
  data?: { resultType: string; result: unknown[] };
}

describe("the rules and the dashboard against a real Prometheus scraping the service", function () {
  this.timeout(90_000);
  let app: TestApp | undefined;
  let sms: SmsReceiver | undefined;
  let prometheus: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let dir: string | undefined;
  let promUrl: string;
  let adminPort: number;
  let stderr = "";

  async function query(expr: string): Promise<QueryAnswer> {
    const res = await fetch(`${promUrl}/api/v1/query?${new URLSearchParams({ query: expr }).toString()}`);
    return (await res.json()) as QueryAnswer;
  }

  /** Evaluates `expr`, failing on a Prometheus error; the series it returned. */
  async function series(expr: string): Promise<unknown[]> {
    const answer = await query(expr);
    expect(answer.error, expr).to.equal(undefined);
    expect(answer.status, expr).to.equal("success");
    return answer.data?.result ?? [];
  }

  before(async function () {
    const which = spawnSync("prometheus", ["--version"]);
    if (which.error) throw new Error("prometheus is not on PATH: install it (apt-get install prometheus)");
    sms = await SmsReceiver.start();
    adminPort = await testPort();
    app = await startTestApp({
      ADMIN_PORT: String(adminPort),
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: sms.url,
      RATE_LIMIT_NUMBER: "1/600",
    });

    dir = mkdtempSync(join(tmpdir(), "ringfence-prometheus-"));
    const config = join(dir, "prometheus.yml");
    writeFileSync(
      config,
      JSON.stringify({
        global: { scrape_interval: "1s", evaluation_interval: "1s" },
        rule_files: [RULES],
        scrape_configs: [{ job_name: JOB, static_configs: [{ targets: [`127.0.0.1:${adminPort}`] }] }],
      }),
    );
    const port = await testPort();
    promUrl = `http://127.0.0.1:${port}`;
    const child = spawn(
      "prometheus",
      [
        `--config.file=${config}`,
        `--storage.tsdb.path=${join(dir, "data")}`,
        `--web.listen-address=127.0.0.1:${port}`,
        "--log.level=warn",
      ],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    prometheus = child;
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    exited = new Promise((resolve) => {
      child.once("exit", () => {
        resolve();
      });
    });
    await waitFor(async () => (await fetch(`${promUrl}/-/ready`)).status === 200, 30_000).catch(() => {
      throw new Error(`prometheus did not become ready: ${stderr}`);
    });

    await driveTraffic(app, sms);
  });

  after(async () => {
    prometheus?.kill("SIGTERM");
    await exited;
    await app?.stop();
    await sms?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  /** V1 sends and checks, V2, lookups over gRPC, server tokens, refusals and a caller's error. */
  async function driveTraffic(app: TestApp, sms: SmsReceiver): Promise<void> {
    const customer = await FraudCustomer.create(app, sms, "Prometheus");
    const api = rest(app.baseUrl);
    for (const phone of ["+33612000001", "+33612000002"]) {
      const sent = await customer.v1(phone);
      await customer.delivered(phone);
      const message = sms.messages.filter((m) => m.to === phone).at(-1)!;
      const checked = await api.post(
        "/v1/check",
        {
          customer_uuid: customer.uuid,
          authentication_uuid: sent.authentication_uuid,
          check_code: SmsReceiver.code(message),
        },
        { "x-api-key": customer.key },
      );
      expect(checked.status, checked.text).to.equal(200);
    }
    // The same number again within RATE_LIMIT_NUMBER: a refusal by rule.
    expect((await customer.v1("+33612000001")).status).to.equal("rate_limited");
    await customer.v2("+33612000003");
    expect(await customer.verify("+33612000003")).to.equal("success");
    // A caller's error: a wrong key.
    const wrong = await api.post(
      "/v1/authentication",
      { customer_uuid: customer.uuid, phone_number: "+33612000004" },
      { "x-api-key": "not-the-key" },
    );
    expect(wrong.status).to.equal(400);

    const lookup = new LookupServiceClient(app.grpcAddress, insecure);
    try {
      const { err } = await unary(
        lookup.lookupPhoneNumber.bind(lookup),
        { phoneNumber: "+33612345678", type: [] },
        metadata({ "customer-uuid": customer.uuid, "x-api-key": customer.key }),
      );
      expect(err).to.equal(null);
    } finally {
      lookup.close();
    }

    const made = JSON.parse(
      (await runCli(["apps", "create", "--name", "Kit"], cliEnv(app.config))).stdout,
    ) as {
      app_id: string;
      management_api_key: string;
    };
    const client = await api.post(
      `/v2/session/apps/${made.app_id}/oauth/clients`,
      { client_name: "kit", provider_url: "https://kit.example.com", grant_types: ["client_credentials"] },
      { authorization: `Bearer ${made.management_api_key}` },
    );
    expect(client.status, client.text).to.equal(201);
    const token = (secret: string) =>
      api.call("POST", "/v1/session/oauth/token", {
        form: { grant_type: "client_credentials" },
        headers: basicAuth(String(client.body.client_id), secret),
      });
    expect((await token(String(client.body.client_secret))).status).to.equal(200);
    expect((await token("not-the-secret")).status).to.equal(401);
  }

  /** Waits until every traffic panel's queries return series (or the wait ends), then returns. */
  async function scraped(): Promise<void> {
    const queries = dataPanels()
      .filter(({ row }) => TRAFFIC_ROWS.includes(row))
      .flatMap(({ panel }) => panel.targets.map((t) => substituted(t.expr)));
    await waitFor(async () => {
      for (const q of queries) if ((await series(q)).length === 0) return false;
      return true;
    }, 30_000).catch(() => undefined);
  }

  it("scrapes the service's admin listener and evaluates every rule group without error", async () => {
    await waitFor(async () => {
      const res = (await (await fetch(`${promUrl}/api/v1/targets`)).json()) as {
        data: { activeTargets: { health: string; labels: { job: string } }[] };
      };
      return res.data.activeTargets.some((t) => t.labels.job === JOB && t.health === "up");
    }, 30_000);
    type Rules = {
      data: { groups: { name: string; rules: { name: string; health: string; lastError?: string }[] }[] };
    };
    const groups = async () => ((await (await fetch(`${promUrl}/api/v1/rules`)).json()) as Rules).data.groups;
    expect((await groups()).map((g) => g.name).sort()).to.deep.equal(rules.groups.map((g) => g.name).sort());
    await waitFor(
      async () => (await groups()).every((g) => g.rules.every((r) => r.health !== "unknown")),
      30_000,
    );
    for (const g of await groups())
      for (const r of g.rules)
        expect({ rule: r.name, health: r.health, error: r.lastError ?? "" }).to.deep.equal({
          rule: r.name,
          health: "ok",
          error: "",
        });
  });

  it("evaluates every recording rule's expression without error; the call rates return series", async () => {
    await scraped();
    for (const r of recordings) await series(r.expr);
    for (const name of ["method_transport:ringfence_requests:rate5m", "job:ringfence_requests:rate5m"]) {
      const expr = recordings.find((r) => r.record === name)!.expr;
      expect(await series(expr), name).to.not.be.empty;
      // And Prometheus records it: the rule's own series, as alerts and panels read it.
      await waitFor(async () => (await series(name)).length > 0, 30_000);
    }
    const byMethod = (await series("method_transport:ringfence_requests:rate5m")) as {
      metric: Record<string, string>;
    }[];
    const seen = new Set(byMethod.map((s) => `${s.metric.transport} ${s.metric.method}`));
    for (const call of [
      "http CreateAuthentication",
      "http CheckVerification",
      "grpc LookupPhoneNumber",
      "http CreateToken",
    ])
      expect(seen.has(call), call).to.equal(true);
  });

  it("evaluates every dashboard query without error; the traffic, latency and token panels return series", async () => {
    await scraped();
    for (const { row, panel } of dataPanels()) {
      for (const target of panel.targets) {
        const found = await series(substituted(target.expr));
        if (TRAFFIC_ROWS.includes(row)) expect(found, `${panel.title} (${target.refId})`).to.not.be.empty;
      }
    }
  });

  it("answers the dashboard's job and instance variables with the scraped service", async () => {
    const wanted: Record<string, string> = { job: JOB, instance: `127.0.0.1:${adminPort}` };
    for (const v of dashboard.templating.list.filter((t) => t.type === "query")) {
      const text = typeof v.query === "string" ? v.query : (v.query?.query ?? "");
      const m = /^label_values\((.+), (\w+)\)$/.exec(text);
      expect(m, `${v.name}: ${text}`).to.not.equal(null);
      const params = new URLSearchParams({ "match[]": substituted(m![1]!) });
      const res = (await (
        await fetch(`${promUrl}/api/v1/label/${m![2]}/values?${params.toString()}`)
      ).json()) as {
        data: string[];
      };
      expect(res.data, v.name).to.include(wanted[v.name]);
    }
  });

  it("names only metrics the service exposes, in the rules and the dashboard", async () => {
    const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
    const families = new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
    const exposed = (name: string) => {
      if (families.has(name)) return true;
      const base = /^(.+)_(bucket|count|sum)$/.exec(name)?.[1];
      return base !== undefined && families.get(base) === "histogram";
    };
    const exprs = [
      ...rules.groups.flatMap((g) => g.rules.map((r) => r.expr)),
      ...dataPanels().flatMap(({ panel }) => panel.targets.map((t) => t.expr)),
    ];
    const names = new Set(exprs.flatMap(metricNames));
    expect(names.size).to.be.at.least(15);
    for (const name of names) expect(exposed(name), name).to.equal(true);
  });
});
