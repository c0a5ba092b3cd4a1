import { expect } from "chai";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { parse } from "yaml";
import { BlockList } from "node:net";
import { cliEnv, startTestApp, type TestApp } from "./support/app.js";
import { loadConfig } from "../src/config.js";
import { testPort } from "./support/ports.js";

/**
 * docker-compose.yml and the Dockerfile cannot be run here (no Docker engine), so what an operator
 * relies on is checked in the files, and the image's health check command is run for real.
 */

const REPO = fileURLToPath(new URL("..", import.meta.url));
const HEALTHCHECK = join(REPO, "src", "healthcheck.ts");

interface HealthCheck {
  test?: string[] | string;
}
interface Service {
  profiles?: string[];
  image?: string;
  command?: string[] | string;
  environment?: Record<string, string>;
  ports?: string[];
  volumes?: string[];
  healthcheck?: HealthCheck;
  depends_on?: Record<string, { condition?: string }> | string[];
  networks?: Record<string, { ipv4_address?: string; aliases?: string[] } | null> | string[];
}
interface Compose {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
  networks?: Record<string, { ipam?: { config?: { subnet?: string }[] } }>;
}

const compose = parse(readFileSync(join(REPO, "docker-compose.yml"), "utf8")) as Compose;
const dockerfile = readFileSync(join(REPO, "Dockerfile"), "utf8");

function service(name: string): Service {
  const s = compose.services[name];
  expect(s, `compose service ${name}`).to.not.equal(undefined);
  return s!;
}

/** The services of each profile: `docker compose --profile <name> up` starts these. */
const PROFILES = {
  production: { redis: "redis", ringfence: "ringfence", envoy: "envoy", envoyAddress: "172.30.0.10" },
  demo: {
    redis: "redis-demo",
    ringfence: "ringfence-demo",
    envoy: "envoy-demo",
    envoyAddress: "172.30.0.11",
  },
} as const;

/**
 * A service's environment as compose substitutes it from `vars`: `${VAR}`, `${VAR:-default}`,
 * `${VAR-default}`, `$$`; `${VAR:?message}` and `${VAR?message}` throw when VAR is missing.
 */
function substituted(env: Record<string, string>, vars: Record<string, string>): Record<string, string> {
  const one = (value: string) =>
    value.replace(
      /\$\$|\$\{(\w+)(?:(:?)([-?])([^}]*))?\}/g,
      (
        all: string,
        name: string | undefined,
        colon: string | undefined,
        op: string | undefined,
        arg: string | undefined,
      ) => {
        if (all === "$$" || name === undefined) return "$";
        const given = vars[name];
        const missing = given === undefined || (colon === ":" && given === "");
        if (op === "?" && missing)
          throw new Error(`required variable ${name} is missing a value: ${arg ?? ""}`);
        if (op === "-" && missing) return arg ?? "";
        return given ?? "";
      },
    );
  return Object.fromEntries(Object.entries(env).map(([k, v]) => [k, one(v)]));
}

function runHealthcheck(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", HEALTHCHECK], {
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("exit", (code) => {
      resolve({ code, stderr });
    });
  });
}

describe("docker-compose.yml and the Dockerfile", function () {
  it("keeps Redis's data in an append-only file on a named volume", function () {
    const redis = service("redis");
    const command = Array.isArray(redis.command) ? redis.command.join(" ") : (redis.command ?? "");
    expect(command).to.match(/--appendonly yes/);
    const dataMount = (redis.volumes ?? []).find((v) => v.split(":")[1] === "/data");
    expect(dataMount, "a volume on /data").to.be.a("string");
    const volume = dataMount!.split(":")[0]!;
    expect(volume, "a named volume, not a host path").to.match(/^[a-z0-9][a-z0-9_.-]*$/);
    expect(compose.volumes ?? {}).to.have.property(volume);
  });

  it("health-checks Redis and the service, and starts each after what it needs is healthy", function () {
    // The service's check is the image's HEALTHCHECK (below); compose inherits it.
    expect(dockerfile).to.match(/^HEALTHCHECK .*\\\n\s+CMD \["node", "dist\/healthcheck.js"\]$/m);
    for (const names of Object.values(PROFILES)) {
      expect(service(names.redis).healthcheck?.test).to.deep.equal(["CMD", "redis-cli", "ping"]);
      expect(service(names.ringfence).depends_on).to.deep.equal({
        [names.redis]: { condition: "service_healthy" },
      });
      expect(service(names.envoy).depends_on).to.deep.equal({
        [names.ringfence]: { condition: "service_healthy" },
      });
    }
  });

  it("runs the service in production, publishes gRPC, and keeps the admin port on loopback", function () {
    const ringfence = service("ringfence");
    expect(ringfence.environment?.NODE_ENV).to.equal("production");
    expect(ringfence.ports).to.include("127.0.0.1:50051:50051");
    expect(ringfence.environment?.ADMIN_PORT).to.equal("9464");
    expect(ringfence.ports).to.include("127.0.0.1:9464:9464");
    expect(dockerfile).to.match(/^ENV NODE_ENV=production /m);
  });

  it("publishes gRPC on loopback only, and trusts x-forwarded-for from Envoy's fixed address alone", function () {
    const subnet = compose.networks?.default?.ipam?.config?.[0]?.subnet ?? "";
    expect(subnet, "a fixed subnet for the compose network").to.match(/^\d+\.\d+\.\d+\.\d+\/\d+$/);
    const [net = "", prefix = ""] = subnet.split("/");
    const inSubnet = new BlockList();
    inSubnet.addSubnet(net, Number(prefix), "ipv4");
    for (const names of Object.values(PROFILES)) {
      // Every published port of the service is bound to 127.0.0.1: no other host reaches it but through Envoy.
      for (const port of service(names.ringfence).ports ?? []) expect(port, port).to.match(/^127\.0\.0\.1:/);
      const envoyNetworks = service(names.envoy).networks;
      const envoyAddress =
        envoyNetworks !== undefined && !Array.isArray(envoyNetworks)
          ? envoyNetworks.default?.ipv4_address
          : undefined;
      expect(envoyAddress, "Envoy's fixed address").to.equal(names.envoyAddress);
      expect(inSubnet.check(envoyAddress!, "ipv4"), "Envoy's address is inside the subnet").to.equal(true);
      const trusted = service(names.ringfence).environment?.TRUSTED_PROXY_CIDRS;
      expect(trusted).to.equal(`${envoyAddress}/32`);
      // The value is one the service accepts, naming exactly that address.
      const cidrs = loadConfig({ TRUSTED_PROXY_CIDRS: trusted }).TRUSTED_PROXY_CIDRS;
      expect(cidrs).to.deep.equal([{ address: envoyAddress, prefix: 32, family: "ipv4" }]);
    }
  });

  it("puts every service in one profile, production, demo or observability, so that plain `up` starts nothing", function () {
    for (const [name, s] of Object.entries(compose.services)) {
      expect(s.profiles, name).to.have.lengthOf(1);
    }
    const members = (profile: string) =>
      Object.keys(compose.services)
        .filter((n) => compose.services[n]?.profiles?.[0] === profile)
        .sort();
    for (const [profile, names] of Object.entries(PROFILES)) {
      expect(members(profile), profile).to.deep.equal([names.envoy, names.redis, names.ringfence].sort());
    }
    expect(members("observability")).to.deep.equal(["grafana", "prometheus"]);
  });

  describe("the observability profile", function () {
    /** The host side of a `./host:container[:ro]` mount, checked to exist, by its container path. */
    function mounts(s: Service): Map<string, string> {
      const out = new Map<string, string>();
      for (const v of s.volumes ?? []) {
        const [host = "", container = ""] = v.split(":");
        if (!host.startsWith("./")) continue;
        expect(existsSync(join(REPO, host)), `${v}: ${host} exists`).to.equal(true);
        expect(v, `${v} is read-only`).to.match(/:ro$/);
        out.set(container, host);
      }
      return out;
    }

    it("runs Prometheus with the rules and a scrape of the service's admin port, in both profiles", function () {
      const prometheus = service("prometheus");
      const files = mounts(prometheus);
      expect(files.get("/etc/prometheus/prometheus.yml")).to.equal("./deploy/prometheus/prometheus.yml");
      expect(files.get("/etc/prometheus/rules.yml")).to.equal("./deploy/prometheus/rules.yml");
      const config = parse(readFileSync(join(REPO, "deploy/prometheus/prometheus.yml"), "utf8")) as {
        rule_files: string[];
        scrape_configs: { job_name: string; static_configs: { targets: string[] }[] }[];
      };
      expect(config.rule_files).to.deep.equal(["rules.yml"]);
      // `ringfence` is production's service and the demo's alias; 9464 is their ADMIN_PORT.
      const targets = config.scrape_configs.flatMap((c) => c.static_configs.flatMap((t) => t.targets));
      expect(targets).to.deep.equal([`ringfence:${service("ringfence").environment?.ADMIN_PORT}`]);
      expect(service("ringfence-demo").environment?.ADMIN_PORT).to.equal("9464");
      const check = spawnSync(
        "promtool",
        ["check", "config", join(REPO, "deploy/prometheus/prometheus.yml")],
        {
          encoding: "utf8",
        },
      );
      expect(check.status, `${check.stdout}${check.stderr}`).to.equal(0);
      expect(prometheus.ports).to.deep.equal(["127.0.0.1:9090:9090"]);
    });

    it("runs Grafana with the Prometheus data source and the dashboard provisioned", function () {
      const grafana = service("grafana");
      const files = mounts(grafana);
      expect(files.get("/etc/grafana/provisioning")).to.equal("./deploy/grafana/provisioning");
      const datasources = parse(
        readFileSync(join(REPO, "deploy/grafana/provisioning/datasources/prometheus.yml"), "utf8"),
      ) as { datasources: { type: string; url: string; isDefault?: boolean }[] };
      expect(datasources.datasources).to.have.lengthOf(1);
      expect(datasources.datasources[0]).to.deep.include({
        type: "prometheus",
        url: "http://prometheus:9090",
        isDefault: true,
      });
      const providers = parse(
        readFileSync(join(REPO, "deploy/grafana/provisioning/dashboards/ringfence.yml"), "utf8"),
      ) as { providers: { type: string; options: { path: string } }[] };
      const path = providers.providers[0]?.options.path ?? "";
      expect(files.get(`${path}/ringfence.json`)).to.equal("./deploy/grafana/ringfence.json");
      expect(grafana.ports).to.deep.equal(["127.0.0.1:3000:3000"]);
    });
  });

  it("asks for no variable anywhere, since compose substitutes the whole file whatever the profile", function () {
    // Comments aside: the parsed file's values.
    expect(JSON.stringify(compose)).to.not.match(/\$\{\w+:?\?/);
    for (const s of Object.values(compose.services)) substituted(s.environment ?? {}, {});
  });

  it("refuses a production start without SECRETS_KEY, real providers and ISSUER_URL, one at a time", function () {
    const env = service("ringfence").environment ?? {};
    const vars: Record<string, string> = {};
    const refusal = () => {
      try {
        loadConfig(substituted(env, vars));
        return "started";
      } catch (e) {
        return (e as Error).message.split(":")[0];
      }
    };
    expect(refusal()).to.equal("invalid SECRETS_KEY");
    vars.SECRETS_KEY = Buffer.alloc(32, 7).toString("base64");
    expect(refusal()).to.equal("invalid SMS_PROVIDER");
    Object.assign(vars, { SMS_PROVIDER: "http", SMS_HTTP_URL: "https://sms.example.com/send" });
    expect(refusal()).to.equal("invalid EMAIL_PROVIDER");
    Object.assign(vars, { EMAIL_PROVIDER: "smtp", SMTP_URL: "smtps://mail.example.com" });
    // No loopback default: tokens would name 127.0.0.1 as their issuer.
    expect(refusal()).to.equal("invalid ISSUER_URL");
    vars.ISSUER_URL = "https://auth.example.com";
    expect(refusal()).to.equal("started");
  });

  it("starts the demo with nothing set: log providers, a development SECRETS_KEY, not in production", function () {
    const config = loadConfig(substituted(service("ringfence-demo").environment ?? {}, {}));
    expect(config.NODE_ENV).to.equal("development");
    expect(config.SMS_PROVIDER).to.equal("log");
    expect(config.EMAIL_PROVIDER).to.equal("log");
    expect(config.devDefaults).to.deep.equal(["SMS_PROVIDER", "EMAIL_PROVIDER"]);
    expect(service("ringfence-demo").environment?.SECRETS_KEY).to.match(/^[A-Za-z0-9+/]{43}=$/);
    expect(config.ISSUER_URL).to.equal("http://127.0.0.1:8080");
    // Envoy's configuration sends gRPC to `ringfence`; the demo's Redis keeps no volume.
    const networks = service("ringfence-demo").networks;
    expect(networks !== undefined && !Array.isArray(networks) ? networks.default?.aliases : []).to.include(
      "ringfence",
    );
    expect(service("redis-demo").volumes ?? []).to.deep.equal([]);
    expect(service("envoy-demo").volumes).to.deep.equal(service("envoy").volumes);
    expect(service("envoy-demo").image).to.equal(service("envoy").image);
  });

  it("builds and runs the image on the current Node LTS line (26)", function () {
    const froms = [...dockerfile.matchAll(/^FROM (\S+)/gm)].map((m) => m[1]);
    expect(froms).to.have.lengthOf(2);
    for (const image of froms) expect(image).to.match(/^node:26-/);
  });

  describe("the image's health check (dist/healthcheck.js)", function () {
    let app: TestApp | undefined;
    let env: Record<string, string>;

    before(async function () {
      const adminPort = await testPort();
      app = await startTestApp({ ADMIN_PORT: String(adminPort) });
      env = {
        ...cliEnv(app.config),
        HOST: "127.0.0.1",
        ADMIN_PORT: String(adminPort),
        GRPC_PORT: String(app.grpcPort),
      };
    });

    after(async function () {
      await app?.stop();
    });

    it("passes while the service is ready, asking the admin port's /readyz", async function () {
      const { code, stderr } = await runHealthcheck(env);
      expect({ code, stderr }).to.deep.equal({ code: 0, stderr: "" });
    });

    it("asks the gRPC health service when the admin port is off", async function () {
      const { code, stderr } = await runHealthcheck({ ...env, ADMIN_PORT: "0" });
      expect({ code, stderr }).to.deep.equal({ code: 0, stderr: "" });
    });

    it("fails, saying why, once the service has stopped", async function () {
      await app?.stop();
      app = undefined;
      const viaAdmin = await runHealthcheck(env);
      expect(viaAdmin.code).to.equal(1);
      expect(viaAdmin.stderr).to.match(/^not ready: /);
      const viaGrpc = await runHealthcheck({ ...env, ADMIN_PORT: "0" });
      expect(viaGrpc.code).to.equal(1);
      expect(viaGrpc.stderr).to.match(/^not ready: gRPC health check failed/);
    });
  });
});
