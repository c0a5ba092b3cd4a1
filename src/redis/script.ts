import { readFileSync } from "node:fs";
import { ERRORS, RingfenceError, type ErrorCode } from "../errors.js";
import { LuaScript, type RedisClient } from "./client.js";

/**
 * What a Lua script takes, by name. The file names its inputs at the top, in order:
 * `local <name>Key = KEYS[i]` for each of `keys`, `local <rest>Keys = { unpack(KEYS, n) }` for a
 * tail of keys (or, for a tail longer than `unpack` can return, the same copied by a loop on
 * one line: `local <rest>Keys = {} for i = n, #KEYS do <rest>Keys[#<rest>Keys + 1] = KEYS[i] end`),
 * and `local <name> = ARGV[i]` (possibly inside `tonumber(...)` or `cjson.decode(...)`) for each
 * of `argv`. The names are checked against the file when the script
 * is defined, so the TypeScript caller and the Lua body cannot drift apart.
 */
export interface ScriptSpec<K extends string, A extends string> {
  file: URL;
  /** Shared Lua functions prepended to the file (otp/window.lua, webhooks/stream.lua, ...). */
  libraries?: readonly URL[];
  keys: readonly K[];
  /** The name of a tail of keys after `keys` (the windows a hold was recorded in, ...). */
  rest?: string;
  argv: readonly A[];
}

/** A script called with named keys and arguments, in the order its file declares them. */
export interface Script<K extends string, A extends string> {
  readonly name: string;
  readonly lua: LuaScript;
  /**
   * Runs the script; `argv` values left undefined must come last (optional arguments) and are
   * not sent. The reply is decoded by `decodeReply` (a refusal throws).
   */
  run(
    redis: RedisClient,
    keys: Readonly<Record<K, string>>,
    argv: Readonly<Record<A, string | number | undefined>>,
    rest?: readonly string[],
  ): Promise<unknown>;
  /**
   * The same script with the settings that never change while the service runs (windows, rules'
   * bounds) in its text, bound to `CONFIG` in Lua, instead of sent with every call: one SHA per
   * configuration, made once per `config` object (keep the object).
   */
  configured(config: object): Script<K, A>;
}

/** The names a Lua file binds to KEYS and ARGV at its top, as `defineScript` reads them. */
export function declaredInputs(source: string): { keys: string[]; rest?: string; argv: string[] } {
  const keys: string[] = [];
  const argv: string[] = [];
  let rest: string | undefined;
  for (const m of source.matchAll(/^local (\w+)Key = KEYS\[(\d+)\]\s*$/gm)) {
    keys[Number(m[2]) - 1] = m[1] as string;
  }
  // `{ unpack(KEYS, n) }`, or the same copied by a loop where the tail may hold more keys than
  // Lua's unpack returns (about 8000).
  const tail =
    /^local (\w+)Keys = (?:\{ ?unpack\(KEYS, (\d+)\) ?\}|\{\} for i = (\d+), #KEYS do \1Keys\[#\1Keys \+ 1\] = KEYS\[i\] end)\s*$/m.exec(
      source,
    );
  if (tail !== null) {
    // A tail that does not start right after the named keys matches no caller.
    const from = tail[2] ?? tail[3];
    rest = Number(from) === keys.length + 1 ? tail[1] : `${tail[1]} from KEYS[${from}]`;
  }
  for (const m of source.matchAll(/^local (\w+) = (?:\w+(?:\.\w+)?\()?ARGV\[(\d+)\]\)?\s*$/gm)) {
    argv[Number(m[2]) - 1] = m[1] as string;
  }
  return rest === undefined ? { keys, argv } : { keys, rest, argv };
}

/**
 * Loads a script and checks its file declares the names `spec` gives (throws at load otherwise,
 * which every test importing the module sees).
 */
export function defineScript<const K extends string, const A extends string = never>(
  spec: ScriptSpec<K, A>,
): Script<K, A> {
  const name = spec.file.pathname.split("/").pop() ?? "script";
  const own = readFileSync(spec.file, "utf8");
  const declared = declaredInputs(own);
  const expected = { keys: [...spec.keys], rest: spec.rest, argv: [...spec.argv] };
  const same = (a: readonly (string | undefined)[], b: readonly (string | undefined)[]) =>
    a.length === b.length && Array.from(a).every((x, i) => x === b[i]);
  if (
    !same(declared.keys, expected.keys) ||
    declared.rest !== expected.rest ||
    !same(declared.argv, expected.argv)
  ) {
    throw new Error(
      `${name} declares KEYS ${JSON.stringify(declared.keys)}${declared.rest === undefined ? "" : ` + ${declared.rest}`}` +
        ` and ARGV ${JSON.stringify(declared.argv)}; its caller names KEYS ${JSON.stringify(expected.keys)}` +
        `${expected.rest === undefined ? "" : ` + ${expected.rest}`} and ARGV ${JSON.stringify(expected.argv)}`,
    );
  }
  const libraries = (spec.libraries ?? []).map((u) => readFileSync(u, "utf8"));
  return scriptOf(name, spec, [...libraries, own].join("\n"));
}

function scriptOf<const K extends string, const A extends string>(
  name: string,
  spec: ScriptSpec<K, A>,
  source: string,
): Script<K, A> {
  const lua = new LuaScript(name, source);
  const configurations = new WeakMap<object, Script<K, A>>();
  return {
    name,
    lua,
    async run(redis, keys, argv, rest = []) {
      const orderedKeys = [...spec.keys.map((k) => keys[k]), ...rest];
      const values = spec.argv.map((a) => argv[a]);
      while (values.length > 0 && values[values.length - 1] === undefined) values.pop();
      if (values.includes(undefined)) throw new Error(`${name}: only trailing arguments may be left out`);
      return decodeReply(await lua.run(redis, orderedKeys, values as (string | number)[]));
    },
    configured(config) {
      let script = configurations.get(config);
      if (script === undefined) {
        script = scriptOf(
          name,
          spec,
          `local CONFIG = cjson.decode(${luaString(JSON.stringify(config))})\n${source}`,
        );
        configurations.set(config, script);
      }
      return script;
    },
  };
}

/** `text` as a Lua long string, its level chosen so that nothing in it closes the string. */
function luaString(text: string): string {
  let level = "";
  while (text.includes(`]${level}]`)) level += "=";
  return `[${level}[${text}]${level}]`;
}

/**
 * The one reply convention of our scripts: a table whose first element is a status, or
 * `{'refused', <code>}` when the script refused the call for a reason the caller answers as an
 * error (a code of src/errors.ts, with the message below). Other replies pass through.
 */
function decodeReply(reply: unknown): unknown {
  if (Array.isArray(reply) && reply[0] === "refused") throw refusal(String(reply[1]));
  return reply;
}

/** What a caller is told when a script refuses for one of these reasons. */
const REFUSALS: Partial<Record<ErrorCode, string>> = {
  negative_balance: "the account balance is too low to send a message",
  spending_limit_exceeded: "this message would pass the account's monthly spending limit",
  suspended_account: "this account is suspended",
  account_invalid: "unknown customer",
};

function refusal(code: string): Error {
  if (code in ERRORS) {
    const c = code as ErrorCode;
    return new RingfenceError(c, REFUSALS[c] ?? c);
  }
  return new Error(`a script refused with an unknown code: ${code}`);
}
