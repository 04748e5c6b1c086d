import {
  loadConfig
} from "./chunk-EQ5ALX7S.js";
export {
  loadConfig
};
//# sourceMappingURL=config-U7DDHFQM.js.map