import { z } from "zod";

/** A start-up error: one line naming the variable and the rule it breaks. */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

/** One setting: its rule (zod) and its entry in docs/settings.md, side by side. */
export interface SettingDef<S extends z.ZodType = z.ZodType> {
  schema: S;
  /** The docs/settings.md section it is listed under (the composition root names them). */
  section: string;
  /** What it does, in Markdown. */
  text: string;
  /** The default as an operator reads it, when it is not the schema's own default written back. */
  default?: string;
  /** The values allowed, when the schema cannot say it in words (numbers and choices it can). */
  rule?: string;
  /** It may hold a URL with a password: quoted with the password as `***`. */
  url?: true;
  /** It is never quoted, not even in the error that refuses it. */
  secret?: true;
  /**
   * A development default that weakens security: when the value is one (`all`: every setting,
   * parsed, for one that another makes moot), and why (refused in production).
   */
  devOnly?: { when(value: z.output<S>, all: Readonly<Record<string, unknown>>): boolean; why: string };
  /** Unset, the start is refused when `NODE_ENV=production`, for this reason. */
  requiredInProduction?: string;
}

/** A setting, its value's type inferred from its schema. */
export function setting<S extends z.ZodType>(def: SettingDef<S>): SettingDef<S> {
  return def;
}

type Definitions = Record<string, SettingDef>;

/** The parsed values of a set of definitions. */
export type Parsed<D extends Definitions> = { [K in keyof D]: z.output<D[K]["schema"]> };

/** What a slice's cross-setting rules may ask while the environment is loaded. */
export interface CheckContext {
  /** Whether the variable was given (an empty one counts as unset). */
  given(name: string): boolean;
  /** The variable's value as an error may quote it. */
  shown(name: string): string;
  /** Another slice's settings, loaded and checked. */
  of<T>(slice: SettingsSlice<T>): T;
}

/** The settings one folder owns, and how they become its typed slice. */
export interface SettingsSlice<T> {
  readonly definitions: Readonly<Definitions>;
  readonly finish: (values: Record<string, unknown>, ctx: CheckContext) => T;
}

/**
 * A folder's settings: each one's rule and docs, and `finish`, which checks the rules between
 * them (throwing a ConfigError) and gives the slice's values.
 */
export function defineSettings<D extends Definitions, T = Parsed<D>>(
  definitions: D,
  finish?: (values: Parsed<D>, ctx: CheckContext) => T,
): SettingsSlice<T> {
  return {
    definitions,
    finish: (values, ctx) => (finish === undefined ? (values as T) : finish(values as Parsed<D>, ctx)),
  };
}

/** A value as a start-up error may quote it: never a secret, never a URL's password, never long. */
export function shownValue(def: SettingDef | undefined, value: string | undefined): string {
  if (value === undefined) return "unset";
  if (def?.secret === true) return "a value (not shown: it is a secret)";
  let shown = value;
  if (def?.url === true && URL.canParse(value)) {
    const u = new URL(value);
    if (u.password !== "") {
      u.password = "***";
      shown = u.toString();
    }
  } else if (def?.url === true) {
    shown = value.replace(/:[^/@:]*@/, ":***@");
  }
  return JSON.stringify(shown.length > 80 ? `${shown.slice(0, 79)}\u2026` : shown);
}

/** A setting's schema without its default, optionality and transforms: what the input must be. */
function inputSchema(def: SettingDef): unknown {
  let s: unknown = def.schema;
  for (;;) {
    if (s instanceof z.ZodDefault || s instanceof z.ZodOptional) s = s.unwrap();
    else if (s instanceof z.ZodPipe) s = s.in;
    else break;
  }
  return s;
}

/**
 * The rule of a number or a list of choices, read off the schema (`must be a whole number from 60
 * to 86400`); undefined for the others, whose rule is their schema's own message.
 */
export function schemaRule(def: SettingDef): string | undefined {
  const s = inputSchema(def);
  if (s instanceof z.ZodNumber) {
    const kind = s.isInt ? "a whole number" : "a number";
    const { minValue: min, maxValue: max } = s;
    if (min !== null && max !== null && Number.isFinite(min) && Number.isFinite(max))
      return `must be ${kind} from ${min} to ${max}`;
    if (min !== null && Number.isFinite(min)) return `must be ${kind} of at least ${min}`;
    return `must be ${kind}`;
  }
  if (s instanceof z.ZodEnum) return `must be one of: ${(s.options as string[]).join(", ")}`;
  return undefined;
}

/** A setting's default as the environment would spell it (`5/600`, `PremiumRate,SharedCost`), if any. */
export function schemaDefault(def: SettingDef): string | undefined {
  const s: unknown = def.schema;
  if (!(s instanceof z.ZodDefault)) return undefined;
  const value: unknown = s.def.defaultValue;
  if (value === null) return "off";
  if (Array.isArray(value)) return value.join(",");
  if (typeof value === "object") {
    const w = value as { limit?: unknown; windowSeconds?: unknown };
    if (typeof w.limit === "number" && typeof w.windowSeconds === "number")
      return `${w.limit}/${w.windowSeconds}`;
    return undefined;
  }
  return typeof value === "string" || typeof value === "number" || typeof value === "boolean"
    ? String(value)
    : undefined;
}
