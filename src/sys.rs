//! (placeholder: sys)
