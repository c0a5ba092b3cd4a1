import { expect } from "chai";
import { ConfigError, loadConfig } from "../src/config.js";

describe("configuration", () => {
  it("has the decided defaults", () => {
    const c = loadConfig({});
    expect(c).to.include({
      GRPC_PORT: 50051,
      HTTP_PORT: 8080,
      HOST: "127.0.0.1",
      REDIS_URL: "redis://127.0.0.1:6379",
      ISSUER_URL: "http://127.0.0.1:8080",
      V1_AFTER_SUNSET: "serve",
    });
    expect(c.REDIS_CLUSTER_NODES).to.equal(undefined);
    expect(c.devDefaults).to.deep.equal(["SECRETS_KEY"]);
  });

  it("reads REDIS_CLUSTER_NODES as a comma list", () => {
    const c = loadConfig({ REDIS_CLUSTER_NODES: "10.0.0.1:7000, 10.0.0.2:7001" });
    expect(c.REDIS_CLUSTER_NODES).to.deep.equal(["10.0.0.1:7000", "10.0.0.2:7001"]);
  });

  const bad: [string, string][] = [
    ["GRPC_PORT", "http"],
    ["HTTP_PORT", "70000"],
    ["REDIS_URL", "localhost:6379"],
    ["REDIS_CLUSTER_NODES", "a,b"],
    ["ISSUER_URL", "ftp://x"],
    ["SECRETS_KEY", "c2hvcnQ="],
    ["V1_AFTER_SUNSET", "never"],
    ["NODE_ENV", "staging"],
  ];
  for (const [name, value] of bad) {
    it(`stops with one line naming ${name} when it is ${JSON.stringify(value)}`, () => {
      expect(() => loadConfig({ [name]: value }))
        .to.throw(ConfigError)
        .with.property("message")
        .that.matches(new RegExp(`^invalid ${name}: [^\\n]+$`));
    });
  }

  it("refuses the development SECRETS_KEY in production", () => {
    expect(() => loadConfig({ NODE_ENV: "production" })).to.throw(ConfigError, /SECRETS_KEY/);
    const key = Buffer.alloc(32, 7).toString("base64");
    expect(loadConfig({ NODE_ENV: "production", SECRETS_KEY: key }).devDefaults).to.deep.equal([]);
  });
});
