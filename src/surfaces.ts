/**
 * Every service's REST surface as its domain declares it (`src/<domain>/surface.ts`), listed for
 * the readers that run without the service: `npm run generate` writes openapi/ringfence.yaml from
 * it (this file, run as a script), and test/envoy.test.ts checks Envoy's V2 areas against it. The
 * running service reads the same declarations from the bindings of src/app.ts's modules.
 */
import { writeFileSync } from "node:fs";
import { DELIVERY_REPORTS, WHATSAPP_WEBHOOK } from "./delivery/surface.js";
import { FRAUD_V2 } from "./fraud/surface.js";
import { LOOKUP_V1, LOOKUP_V2 } from "./lookup/surface.js";
import { OAUTH } from "./oauth/surface.js";
import { OPENAPI_PATH, renderYaml } from "./openapi/generate.js";
import type { DeclaredService } from "./rpc/surface.js";
import { PASSKEYS } from "./passkeys/surface.js";
import { SESSION } from "./session/surface.js";
import { STEP_UP } from "./stepup/surface.js";
import { VERIFICATION_V2, VERIFY_V1 } from "./verify/surface.js";

export const SERVICES: readonly DeclaredService[] = [
  LOOKUP_V1,
  VERIFY_V1,
  VERIFICATION_V2,
  LOOKUP_V2,
  FRAUD_V2,
  OAUTH,
  SESSION,
  PASSKEYS,
  STEP_UP,
  DELIVERY_REPORTS,
  WHATSAPP_WEBHOOK,
];

if (process.argv[1] !== undefined && import.meta.url.endsWith(process.argv[1].split("/").pop() ?? "\0")) {
  writeFileSync(OPENAPI_PATH, renderYaml(SERVICES));
}
