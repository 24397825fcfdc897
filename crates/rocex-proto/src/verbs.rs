//! The verbs vocabulary: QP types, states and attributes, work requests and completions.
//! It lives in rocex-verbs-types, below the engine, so that the client side can use it
//! without linking the engine; the engine's code names it through this module.

pub use rocex_verbs_types::*;

// The FLUSH placement bits of the vocabulary are the FETH's.
const _: () = assert!(
    PLACEMENT_GLOBAL_VISIBILITY == rocex_wire::feth::PLT_GLOBAL_VISIBILITY
        && PLACEMENT_PERSISTENCE == rocex_wire::feth::PLT_PERSISTENCE
);
