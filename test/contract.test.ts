import { expect } from "chai";
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { loadContract } from "../src/rpc/contract.js";

const BUF = join("node_modules", ".bin", "buf");

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : [p];
  });
}

describe("proto contract", () => {
  let tmp: string;
  before(function () {
    this.timeout(60_000);
    tmp = mkdtempSync(join(tmpdir(), "ringfence-gen-"));
    execFileSync(BUF, ["generate", "-o", tmp], { stdio: "pipe" });
    execFileSync(BUF, ["build", "--as-file-descriptor-set", "-o", join(tmp, "descriptor.binpb")], {
      stdio: "pipe",
    });
  });
  after(() => {
    rmSync(tmp, { recursive: true, force: true });
  });

  it("has generated code that matches the protos (run `npm run generate` when this fails)", () => {
    const fresh = join(tmp, "src", "gen");
    const committed = join("src", "gen");
    const names = (d: string) =>
      files(d)
        .map((f) => relative(d, f))
        .sort();
    expect(names(committed)).to.deep.equal(names(fresh));
    for (const name of names(fresh)) {
      expect(readFileSync(join(committed, name), "utf8"), name).to.equal(
        readFileSync(join(fresh, name), "utf8"),
      );
    }
  });

  it("has a descriptor for Envoy that matches the protos (run `npm run generate` when this fails)", () => {
    expect(
      readFileSync(join("envoy", "descriptor.binpb")).equals(readFileSync(join(tmp, "descriptor.binpb"))),
    ).to.equal(true);
  });

  it("passes buf lint", () => {
    expect(execFileSync(BUF, ["lint"], { encoding: "utf8" })).to.equal("");
  });

  describe("buf breaking against the last release (releases/v0.1.0.binpb)", () => {
    const RELEASE = join(process.cwd(), "releases", "v0.1.0.binpb");
    const breaking = (cwd: string) => {
      try {
        execFileSync(join(process.cwd(), BUF), ["breaking", "--against", RELEASE, "--error-format", "json"], {
          cwd,
          encoding: "utf8",
        });
        return { code: 0, out: "" };
      } catch (err) {
        const e = err as { status: number; stdout: string };
        return { code: e.status, out: e.stdout };
      }
    };
    /** A copy of the module (buf.yaml and proto/) with `edit` made to one file. */
    const changed = (file: string, edit: (text: string) => string) => {
      const dir = mkdtempSync(join(tmpdir(), "ringfence-breaking-"));
      cpSync("proto", join(dir, "proto"), { recursive: true });
      cpSync("buf.yaml", join(dir, "buf.yaml"));
      const path = join(dir, "proto", file);
      const before = readFileSync(path, "utf8");
      const after = edit(before);
      expect(after, "the edit changed nothing").to.not.equal(before);
      writeFileSync(path, after);
      return dir;
    };

    it("passes for the protos as they are", () => {
      expect(breaking(process.cwd())).to.deep.equal({ code: 0, out: "" });
    });

    it("fails when a released field is deleted, naming the rule", () => {
      const dir = changed("ringfence/lookup/v1/lookup_service.proto", (t) =>
        t.replace(/^\s*optional string caller_name = \d+;$/m, ""),
      );
      try {
        const r = breaking(dir);
        expect(r.code).to.not.equal(0);
        expect(r.out).to.match(/"type":"FIELD_NO_DELETE"/);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it("fails when a released RPC is renamed, naming the rule", () => {
      const dir = changed("ringfence/lookup/v1/lookup_service.proto", (t) =>
        t.replace("rpc LookupPhoneNumber(", "rpc LookupNumber("),
      );
      try {
        const r = breaking(dir);
        expect(r.code).to.not.equal(0);
        expect(r.out).to.match(/"type":"RPC_NO_DELETE"/);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });

  it("annotates the V1 lookup with its REST path", () => {
    const m = loadContract().methods.get("/ringfence.lookup.v1.LookupService/LookupPhoneNumber");
    expect(m?.http).to.deep.equal([
      { verb: "GET", pattern: "/v1/lookup/{phone_number}", body: "", responseBody: "" },
    ]);
  });
});
