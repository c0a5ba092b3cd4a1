import { expect } from "chai";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { parse } from "yaml";
import { BlockList } from "node:net";
import { cliEnv, startTestApp, type TestApp } from "./support/app.js";
import { loadConfig } from "../src/config.js";
import { freePort } from "./support/redis.js";

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
  image?: string;
  command?: string[] | string;
  environment?: Record<string, string>;
  ports?: string[];
  volumes?: string[];
  healthcheck?: HealthCheck;
  depends_on?: Record<string, { condition?: string }> | string[];
  networks?: Record<string, { ipv4_address?: string } | null> | string[];
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
    expect(service("redis").healthcheck?.test).to.deep.equal(["CMD", "redis-cli", "ping"]);
    // The service's check is the image's HEALTHCHECK (below); compose inherits it.
    expect(dockerfile).to.match(/^HEALTHCHECK .*\\\n\s+CMD \["node", "dist\/healthcheck.js"\]$/m);
    expect(service("ringfence").depends_on).to.deep.equal({ redis: { condition: "service_healthy" } });
    expect(service("envoy").depends_on).to.deep.equal({ ringfence: { condition: "service_healthy" } });
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
    // Every published port of the service is bound to 127.0.0.1: no other host reaches it but through Envoy.
    for (const port of service("ringfence").ports ?? []) expect(port, port).to.match(/^127\.0\.0\.1:/);
    const subnet = compose.networks?.default?.ipam?.config?.[0]?.subnet ?? "";
    expect(subnet, "a fixed subnet for the compose network").to.match(/^\d+\.\d+\.\d+\.\d+\/\d+$/);
    const envoyNetworks = service("envoy").networks;
    const envoyAddress =
      envoyNetworks !== undefined && !Array.isArray(envoyNetworks)
        ? envoyNetworks.default?.ipv4_address
        : undefined;
    expect(envoyAddress, "Envoy's fixed address").to.be.a("string");
    const [net = "", prefix = ""] = subnet.split("/");
    const inSubnet = new BlockList();
    inSubnet.addSubnet(net, Number(prefix), "ipv4");
    expect(inSubnet.check(envoyAddress!, "ipv4"), "Envoy's address is inside the subnet").to.equal(true);
    const trusted = service("ringfence").environment?.TRUSTED_PROXY_CIDRS;
    expect(trusted).to.equal(`${envoyAddress}/32`);
    // The value is one the service accepts, naming exactly that address.
    const cidrs = loadConfig({ TRUSTED_PROXY_CIDRS: trusted }).TRUSTED_PROXY_CIDRS;
    expect(cidrs).to.deep.equal([{ address: envoyAddress, prefix: 32, family: "ipv4" }]);
  });

  it("requires ISSUER_URL rather than defaulting it to a loopback address", function () {
    expect(service("ringfence").environment?.ISSUER_URL).to.match(/^\$\{ISSUER_URL:\?[^}]+\}$/);
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
      const adminPort = await freePort();
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
