import type { ServiceDefinition } from "@grpc/grpc-js";
import type { ErrorDialect } from "../errors.js";

/**
 * What the proto does not say about a service's REST surface, declared by the domain that serves
 * it (`src/<domain>/surface.ts`) and read by its binding (src/rpc/binding.ts), the built-in gateway,
 * the OpenAPI document (src/openapi/document.ts) and test/envoy.test.ts. Methods are named by their
 * handlers (the rpc's name in lowerCamelCase).
 */
export interface Surface<S extends ServiceDefinition = ServiceDefinition> {
  /** The error body family of its methods (docs/gateway.md#error-bodies). */
  readonly dialect: ErrorDialect;
  /** Methods whose errors take another family (the token endpoint among management calls). */
  readonly methodDialects?: Partial<Record<keyof S & string, ErrorDialect>>;
  /** Success statuses other than 200 (docs/gateway.md#success-statuses). */
  readonly successStatuses?: Partial<Record<keyof S & string, 201 | 204>>;
  /** The caller kind of each method that has one (src/rpc/callers.ts); the others are public. */
  readonly callers?: Readonly<Partial<Record<keyof S & string, string>>>;
  /**
   * The REST areas it owns that answer with the V2 error body, a path no route takes included:
   * an area `x` is `/v2/x` and below (docs/gateway.md#unknown-routes-and-methods).
   */
  readonly v2Areas?: readonly string[];
  /** Whether its calls are deprecated (V1), as the OpenAPI document marks them. */
  readonly deprecated?: boolean;
  /** The form of each method whose body is an `HttpBody` form, as a JSON schema (OpenAPI). */
  readonly forms?: Partial<Record<keyof S & string, JsonSchema>>;
  /** Each method whose `HttpBody` body is not a form: its media type and schema (OpenAPI). */
  readonly rawBodies?: Partial<Record<keyof S & string, RawContent>>;
  /** Each method that answers an `HttpBody` with content: its media type and schema (OpenAPI). */
  readonly rawAnswers?: Partial<Record<keyof S & string, RawContent>>;
  /** Request headers a method requires besides its caller's credentials (OpenAPI). */
  readonly headerParameters?: Partial<Record<keyof S & string, readonly HeaderParameter[]>>;
}

export type JsonSchema = Readonly<Record<string, unknown>>;

/** The content of an `HttpBody` as the OpenAPI document describes it. */
export interface RawContent {
  readonly mediaType: string;
  readonly schema: JsonSchema;
  readonly description: string;
}

/** A required request header, as the OpenAPI document lists it. */
export interface HeaderParameter {
  readonly name: string;
  readonly schema: JsonSchema;
  readonly description: string;
}

/** A service's surface as its readers see it, by handler name; a binding is one too. */
export interface DeclaredService {
  /** Fully qualified proto name: the package, a dot, the service. */
  readonly serviceName: string;
  /** The error body family of a method. */
  readonly dialectOf: (method: string) => ErrorDialect;
  /** The HTTP status of a method's success, when it is not 200 (201 created, 204 no content). */
  readonly successStatus: (method: string) => 201 | 204 | undefined;
  /** The kind of a method's caller, or undefined for a public method. */
  readonly callerKindOf: (method: string) => string | undefined;
  readonly v2Areas: readonly string[];
  readonly deprecated: boolean;
  readonly formOf: (method: string) => JsonSchema | undefined;
  readonly rawBodyOf: (method: string) => RawContent | undefined;
  readonly rawAnswerOf: (method: string) => RawContent | undefined;
  readonly headerParametersOf: (method: string) => readonly HeaderParameter[];
}

/** A service's definition with what its domain declares of it: what its module binds. */
export interface ServiceDeclaration<S extends ServiceDefinition> extends DeclaredService {
  readonly definition: S;
  readonly surface: Surface<S>;
}

export function declareService<S extends ServiceDefinition>(
  definition: S,
  surface: Surface<S>,
): ServiceDeclaration<S> {
  return { ...readSurface(definition, surface), definition, surface };
}

/** The readers' view of `surface`, for the service `definition`. */
export function readSurface<S extends ServiceDefinition>(
  definition: S,
  surface: Surface<S>,
): DeclaredService {
  const first = Object.values(definition)[0];
  if (first === undefined) throw new Error("a service without methods cannot be served");
  const byMethod = <T>(table: Partial<Record<string, T>> | undefined) => table ?? {};
  const dialects = byMethod<ErrorDialect>(surface.methodDialects);
  const statuses = byMethod<201 | 204>(surface.successStatuses);
  const callers = byMethod<string>(surface.callers);
  const forms = byMethod<JsonSchema>(surface.forms);
  const headers = byMethod<readonly HeaderParameter[]>(surface.headerParameters);
  const rawBodies = byMethod<RawContent>(surface.rawBodies);
  const rawAnswers = byMethod<RawContent>(surface.rawAnswers);
  return {
    serviceName: first.path.split("/")[1] ?? "",
    dialectOf: (method) => dialects[method] ?? surface.dialect,
    successStatus: (method) => statuses[method],
    callerKindOf: (method) => callers[method],
    v2Areas: surface.v2Areas ?? [],
    deprecated: surface.deprecated ?? false,
    formOf: (method) => forms[method],
    rawBodyOf: (method) => rawBodies[method],
    rawAnswerOf: (method) => rawAnswers[method],
    headerParametersOf: (method) => headers[method] ?? [],
  };
}

/** A handler's name for an rpc's (`LookupPhoneNumber` → `lookupPhoneNumber`). */
export function handlerName(rpc: string): string {
  return rpc.charAt(0).toLowerCase() + rpc.slice(1);
}
