//! The names of a type's generic parameters, taken once per derive for the
//! token walkers that look for them (each name was a `to_string`, per field).

use crate::ast::Shell;

pub struct Names {
    /// Type parameters: a tuple in a type naming one gets no impl here, and
    /// a child's type naming one gets a `KvChild` bound.
    pub types: Vec<String>,
    /// Type parameters and `Self`: a child's type naming one is not registered.
    pub types_and_self: Vec<String>,
    /// Type and const parameters and `Self`: an unmarked field's type naming
    /// one is not checked where the struct is defined.
    pub all_and_self: Vec<String>,
    pub lifetimes: Vec<String>,
    /// Type parameters that may be unsized (`P: ?Sized`, in the parameter
    /// list or the where clause): a child's type naming one may hold a
    /// trait object.
    pub unsized_types: Vec<String>,
}

impl Names {
    pub fn of(shell: &Shell<'_>) -> Names {
        let generics = shell.generics;
        let types: Vec<String> = generics
            .type_params()
            .map(|param| param.ident.to_string())
            .collect();
        let mut types_and_self = types.clone();
        types_and_self.push("Self".to_owned());
        let mut all_and_self = types.clone();
        all_and_self.extend(generics.const_params().map(|param| param.ident.to_string()));
        all_and_self.push("Self".to_owned());
        let lifetimes = generics
            .lifetimes()
            .map(|param| param.lifetime.ident.to_string())
            .collect();
        let mut unsized_types: Vec<String> = generics
            .type_params()
            .filter(|param| maybe_unsized(&param.bounds))
            .map(|param| param.ident.to_string())
            .collect();
        for predicate in generics
            .where_clause
            .iter()
            .flat_map(|w| w.predicates.iter())
        {
            if let syn::WherePredicate::Type(predicate) = predicate {
                if let (syn::Type::Path(path), true) =
                    (&predicate.bounded_ty, maybe_unsized(&predicate.bounds))
                {
                    if let Some(ident) = path.path.get_ident() {
                        unsized_types.push(ident.to_string());
                    }
                }
            }
        }
        Names {
            types,
            types_and_self,
            all_and_self,
            lifetimes,
            unsized_types,
        }
    }
}

/// Whether `bounds` has `?Sized`.
fn maybe_unsized<P>(bounds: &syn::punctuated::Punctuated<syn::TypeParamBound, P>) -> bool {
    bounds.iter().any(|bound| {
        matches!(bound, syn::TypeParamBound::Trait(trait_bound) if trait_bound.maybe.is_some())
    })
}
