import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

/**
 * CPU time a server spent, read from Linux's /proc: user plus system time of a process and of
 * every process below it (a service's node:cluster workers), threads included (a signature on
 * libuv's pool counts). Undefined where there is no /proc. The bench divides it by the calls a
 * round answered: what each call cost the server, whatever else shared the machine.
 */
export function cpuSecondsOf(pid: number): number | undefined {
  let entries: string[];
  try {
    entries = readdirSync("/proc").filter((d) => /^\d+$/.test(d));
  } catch {
    return undefined;
  }
  const children = new Map<number, number[]>();
  const ticks = new Map<number, number>();
  for (const entry of entries) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue; // gone meanwhile
    }
    // The fields after the parenthesised command name: state, ppid, ... utime (14th), stime (15th).
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const parent = Number(fields[1]);
    children.set(parent, [...(children.get(parent) ?? []), Number(entry)]);
    ticks.set(Number(entry), Number(fields[11]) + Number(fields[12]));
  }
  if (!ticks.has(pid)) return undefined;
  let total = 0;
  const visit = (p: number) => {
    total += ticks.get(p) ?? 0;
    for (const child of children.get(p) ?? []) visit(child);
  };
  visit(pid);
  return total / clockTicks();
}

let ticksPerSecond: number | undefined;

/** USER_HZ, the unit of /proc's times (100 on Linux's usual builds). */
function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    const answer = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim());
    ticksPerSecond = Number.isFinite(answer) && answer > 0 ? answer : 100;
  }
  return ticksPerSecond;
}
