/**
 * What every command of the operator CLI is made of (docs/cli.md), whichever domain brings it: its
 * errors, its one line of JSON, the stores it is handed, reading arguments, the notes of its page,
 * and the exit codes and stderr lines of a run. Knows no domain: the root (src/commands.ts) opens
 * the stores and mounts each domain's commands.
 */
import { Command, CommanderError, InvalidArgumentError } from "commander";
import type { z } from "zod";
import { ConfigError } from "../settings/define.js";

/** Bad input: one line on stderr, exit 2. */
export class UsageError extends Error {}

/** A command's answer: one line of JSON on stdout. */
export function print(value: unknown): void {
  process.stdout.write(JSON.stringify(value) + "\n");
}

/**
 * Runs `fn` with the stores a command needs, opened from the environment's settings and closed
 * after; each domain's commands name the stores they need as `S`.
 */
export type OpenStores<S> = (fn: (stores: S) => Promise<void>) => Promise<void>;

/** The value `schema` reads, or a usage error naming the first field it refuses. */
export function parseOrThrow<T>(schema: z.ZodType<T>, value: unknown): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  throw new UsageError(`${issue?.path.join(".") ?? "input"} ${issue?.message ?? "is invalid"}`);
}

/** An argument parser: the value `schema` reads, else `"<value>" is not <what>` (exit 2). */
export function argParser<T>(schema: z.ZodType<T>, what: string): (value: string) => T {
  return (value) => {
    const r = schema.safeParse(value);
    if (!r.success) throw new InvalidArgumentError(`"${value}" is not ${what}`);
    return r.data;
  };
}

/** A parser of comma-separated items, each trimmed and read by `item`. */
export function commaSeparated<T>(item: (value: string) => T): (value: string) => T[] {
  return (value) => value.split(",").map((s) => item(s.trim()));
}

/** What docs/cli.md says of a command beyond its --help (Markdown, links relative to docs/). */
const notes = new WeakMap<Command, string[]>();

/** Adds a paragraph of docs/cli.md to a command, leaving its --help as it is. */
export function documented<C extends Command>(cmd: C, note: string): C {
  notes.set(cmd, [...(notes.get(cmd) ?? []), note]);
  return cmd;
}

export function docNotes(cmd: Command): readonly string[] {
  return notes.get(cmd) ?? [];
}

/**
 * Runs the command on the command line. Help and --version exit 0; bad input (commander's own, a
 * UsageError, a ConfigError) exits 2 and any other failure 1, each with one line on stderr, written
 * after what `beforeLastLine` flushes.
 */
export async function runProgram(program: Command, beforeLastLine: () => Promise<void>): Promise<void> {
  // Subcommands made with `new Command()` do not inherit these: every command exits 2 on bad input.
  (function quiet(cmd: Command): void {
    for (const sub of cmd.commands) {
      sub.exitOverride().configureOutput({ outputError: () => undefined });
      quiet(sub);
    }
  })(program);

  try {
    await program.parseAsync(process.argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.exitCode === 0) process.exit(0);
      process.stderr.write(`ringfence: ${err.message.replace(/^error: /, "")}\n`);
      process.exit(2);
    }
    const usage = err instanceof UsageError || err instanceof ConfigError;
    // The log's lines first, so that this one comes last, as it happened.
    await beforeLastLine();
    process.stderr.write(`ringfence: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(usage ? 2 : 1);
  }
}
