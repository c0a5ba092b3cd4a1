import { z } from "zod";
import {
  ConfigError,
  schemaRule,
  shownValue,
  type CheckContext,
  type SettingDef,
  type SettingsSlice,
} from "./define.js";
import { sharedSettings, type SharedSettings } from "./shared.js";

type Union<S> = S extends SettingsSlice<infer T> ? T : never;
type Intersection<U> = (U extends unknown ? (u: U) => void : never) extends (i: infer I) => void ? I : never;

/** What a load gives: the shared settings, every asked slice's, and the development defaults in use. */
export type Loaded<S extends readonly SettingsSlice<object>[]> = SharedSettings &
  Intersection<Union<S[number]>> & {
    /** Settings that fall back to insecure development defaults, for the start-up warning. */
    devDefaults: string[];
  };

/** Every definition of these slices (the shared ones first), by name. */
export function definitionsOf(slices: readonly SettingsSlice<object>[]): Map<string, SettingDef> {
  const all = new Map<string, SettingDef>();
  for (const slice of [sharedSettings, ...slices.filter((s) => s !== sharedSettings)])
    for (const [name, def] of Object.entries(slice.definitions)) {
      if (all.has(name)) throw new Error(`setting ${name} is defined twice`);
      all.set(name, def);
    }
  return all;
}

/**
 * Reads and validates the environment for the shared settings and `slices`; throws a ConfigError
 * with one line naming the variable and the rule it breaks, quoting the value only when it is not a
 * secret. Each slice checks its own rules between settings; then production refuses the
 * development defaults and the settings it requires.
 */
export function loadSettings<S extends readonly SettingsSlice<object>[]>(
  slices: S,
  env: NodeJS.ProcessEnv = process.env,
): Loaded<S> {
  const defs = definitionsOf(slices);
  const given = emptyAsUnset(env);
  const schema = z.object(Object.fromEntries([...defs].map(([name, def]) => [name, def.schema]))).strip();
  const parsed = schema.safeParse(given);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const name = String(issue?.path[0] ?? "environment");
    const def = defs.get(name);
    const rule = (def === undefined ? undefined : schemaRule(def)) ?? issue?.message ?? "is not valid";
    throw new ConfigError(`invalid ${name}: ${rule} (got ${shownValue(def, env[name])})`);
  }
  const values: Record<string, unknown> = parsed.data;
  const devDefaults = [...defs]
    .filter(([name, def]) => def.devOnly?.when(values[name], values) === true)
    .map(([name]) => name);

  const done = new Map<SettingsSlice<object>, object>();
  const ctx: CheckContext = {
    given: (name) => given[name] !== undefined,
    shown: (name) => shownValue(defs.get(name), env[name]),
    of: <T>(slice: SettingsSlice<T>): T => {
      const known = done.get(slice as SettingsSlice<object>);
      if (known !== undefined) return known as T;
      const own = Object.fromEntries(Object.keys(slice.definitions).map((name) => [name, values[name]]));
      const result = slice.finish(own, ctx);
      done.set(slice as SettingsSlice<object>, result as object);
      return result;
    },
  };
  const merged: Record<string, unknown> = {};
  for (const slice of [sharedSettings, ...slices]) Object.assign(merged, ctx.of(slice));

  const shared = ctx.of(sharedSettings);
  if (shared.NODE_ENV === "production") {
    const [weak] = devDefaults;
    if (weak !== undefined) {
      const why = defs.get(weak)?.devOnly?.why ?? "development only";
      throw new ConfigError(`invalid ${weak}: ${why}, refused when NODE_ENV=production`);
    }
    for (const [name, def] of defs)
      if (def.requiredInProduction !== undefined && !ctx.given(name))
        throw new ConfigError(
          `invalid ${name}: required when NODE_ENV=production (${def.requiredInProduction})`,
        );
  }
  return { ...merged, devDefaults } as Loaded<S>;
}

function emptyAsUnset(env: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined && e[1] !== ""),
  );
}
