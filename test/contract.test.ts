import { expect } from "chai";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
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

  it("annotates the V1 lookup with its REST path", () => {
    const m = loadContract().methods.get("/ringfence.lookup.v1.LookupService/LookupPhoneNumber");
    expect(m?.http).to.deep.equal([
      { verb: "GET", pattern: "/v1/lookup/{phone_number}", body: "", responseBody: "" },
    ]);
  });
});
