import { execFileSync, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { expect } from "chai";
import { CELLS, isService, targetLabel } from "../bench/report.js";
import { THREE_PROVIDERS } from "../bench/service.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/**
 * Runs the bench (`npm run bench -- …` without its build: the tests run on the dist/ that
 * `npm install` or `npm run build` made, as every test that starts the CLI does) to its end;
 * resolves its exit code and outputs.
 */
function runBench(
  args: string[],
  script = "bench/bench.ts",
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", script, ...args], {
      cwd: ROOT,
      env: { ...process.env, NODE_ENV: "" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.once("exit", (code) => {
      resolve({ code, stdout, stderr });
    });
  });
}

const NUMBER = /^\d+(\.\d+)?$/;
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

describe("npm run bench", () => {
  it("a smoke run prints the table: every call and reference with numbers, and Redis work per call of ours", async function () {
    // A bound against a hung run, not a speed goal: the smoke run is a minute on an idle machine.
    this.timeout(600_000);
    const { code, stdout, stderr } = await runBench(["--smoke"]);
    expect(code, stderr.split("\n").slice(-20).join("\n")).to.equal(0);

    const rows = stdout
      .split("\n")
      .filter((l) => l.startsWith("| ") && !l.startsWith("| Call") && !l.startsWith("| ---"))
      .map((l) =>
        l
          .slice(2, -2)
          .split(" | ")
          .map((c) => c.trim()),
      );
    const expected = CELLS.flatMap((c) =>
      (["ringfence", ...c.refs] as const).map((t) => [c.label, targetLabel(c, t)]),
    );
    expect(rows.map((r) => r.slice(0, 2))).to.deep.equal(expected);
    const ours = new Set(
      CELLS.flatMap((c) =>
        (["ringfence", ...c.refs] as const).filter(isService).map((t) => `${c.label} / ${targetLabel(c, t)}`),
      ),
    );
    for (const [call, target, rps, p50, p99, vsOidc, vsFloor, commands, awaited, all, bytes] of rows) {
      const where = `${call} / ${target}`;
      for (const n of [rps, p50, p99]) expect(n, where).to.match(NUMBER);
      expect(Number(rps), where).to.be.greaterThan(0);
      // Ours, the three-provider service of the REST send included, has the Redis columns.
      if (ours.has(where)) {
        for (const n of [commands, awaited, all]) expect(n, where).to.match(/^-?\d+\.\d\d$/);
        expect(bytes, where).to.match(/^-?\d+$/);
        if (call === "REST token")
          expect([vsOidc, vsFloor], where).to.satisfy((r: string[]) =>
            r.every((x) => /^\d+\.\d\d×$/.test(x)),
          );
        if (call === "gRPC token") expect(vsFloor, where).to.match(/^\d+\.\d\d×$/);
      }
    }
    expect(stdout).to.include("NODE_ENV=production");
    expect(stdout).to.match(/WORKERS=/);
    // The REST send with three providers and a conversion route, beside the one with one provider:
    // its budget of awaited round trips, its CPU per call against the one provider's, and the route
    // spreading its messages over the three (the route not obeyed, the first would take them all).
    expect(stdout).to.match(/^- Three providers: .*DELIVERY_PROVIDERS.*--strategy conversion/m);
    expect(stdout).to.match(
      /^- REST send, three providers: ≤ 2 Redis round trip\(s\) on the answer path: -?\d+\.\d\d .*, (met|MISSED)$/m,
    );
    const spread =
      /^- Messages the three-provider service gave each provider .*: (.*)$/m.exec(stdout)?.[1] ?? "";
    for (const p of THREE_PROVIDERS) expect(spread, p.name).to.match(new RegExp(`${p.name} [1-9]\\d*`));
    // What each call cost its server, ours and every reference's, where /proc tells it.
    if (process.platform === "linux") {
      const cpu = stdout.slice(stdout.indexOf("Server CPU per call")).split("\n").slice(1);
      for (const cell of CELLS) {
        const line = cpu.find((l) => l.startsWith(`- ${cell.label}: `)) ?? "";
        for (const target of ["ringfence", ...cell.refs] as const)
          expect(line, cell.label).to.match(new RegExp(`${escape(targetLabel(cell, target))} \\d+ µs`));
      }
      // One provider or three, in the same rounds.
      expect(stdout).to.match(
        /^- REST send CPU per call, three providers \/ one provider ≤ 1\.00×: \d+\.\d{3}× \(\d+ against \d+ µs; \d+ against \d+ req\/s\), (met|MISSED)$/m,
      );
    }
  });

  it("--help prints the usage and its options", async function () {
    this.timeout(60_000);
    const { code, stdout } = await runBench(["--help"]);
    expect(code).to.equal(0);
    for (const option of [
      "--smoke",
      "--duration",
      "--connections",
      "--rounds",
      "--only",
      "--workers",
      "--json",
    ])
      expect(stdout).to.include(option);
  });
});

describe("npm run bench:compare", () => {
  it("serves a revision's build beside dist/, alternates the load, and prints both sides of every pair and the medians", async function () {
    // A bound against a hung run, not a speed goal: a build of HEAD and 2 pairs of 1 s.
    this.timeout(600_000);
    const { code, stdout, stderr } = await runBench(
      ["--smoke", "--base", "HEAD", "--cell", "grpc-token"],
      "bench/compare.ts",
    );
    expect(code, stderr.split("\n").slice(-20).join("\n")).to.equal(0);
    const pairs = stderr.split("\n").filter((l) => l.startsWith("bench:compare: pair "));
    expect(pairs).to.have.length(2);
    for (const pair of pairs) expect(pair).to.match(/HEAD \d+\/s \d+ µs, dist\/ \d+\/s \d+ µs$/);
    expect(stdout).to.match(
      /^grpc-token, dist\/ against HEAD, 2 pairs of 1 s: req\/s ×\d+\.\d{3}, server CPU per call ×\d+\.\d{3}/,
    );
    // The revision's worktree is gone with the run.
    const worktrees = execFileSync("git", ["worktree", "list"], { cwd: ROOT, encoding: "utf8" });
    expect(worktrees).to.not.include("ringfence-base-");
  });

  it("refuses an unknown cell, naming the cells it has, and a revision git would read as an option", async function () {
    this.timeout(60_000);
    const { code, stderr } = await runBench(["--cell", "rest-introspect"], "bench/compare.ts");
    expect(code).to.equal(2);
    expect(stderr).to.include('no cell "rest-introspect"');
    expect(stderr).to.include("grpc-token");
    // A revision that git would read as an option, refused before git sees it.
    const option = await runBench(["--base=--orphan", "--cell", "grpc-token"], "bench/compare.ts");
    expect(option.code).to.equal(2);
    expect(option.stderr).to.include('"--orphan" is not a revision');
  });
});
