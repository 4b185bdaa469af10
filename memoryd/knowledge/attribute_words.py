"""The word lists the attribute rules read: jobs, nationalities, diets, relationship statuses,
and the words that tell a rule a clause is not what it looks like ("I work at night")."""

from __future__ import annotations

#: Keys whose values coexist: a second allergy or language adds, it does not replace.
MULTI_VALUED = frozenset({"allergy", "language", "diet_restriction", "school_attended"})

JOBS = frozenset(
    """engineer developer programmer designer teacher professor nurse doctor physician surgeon
    dentist lawyer attorney accountant architect scientist researcher analyst consultant manager
    director ceo cto cfo coo founder cofounder co-founder entrepreneur writer author journalist
    editor artist musician photographer chef cook baker barista waiter waitress bartender pilot
    driver mechanic electrician plumber carpenter farmer firefighter policeman policewoman officer
    soldier student intern freelancer contractor therapist psychologist psychiatrist pharmacist
    veterinarian vet librarian cashier salesman saleswoman realtor banker economist translator
    actor actress dancer singer coach trainer recruiter administrator assistant secretary clerk
    technician paramedic tutor lecturer homemaker specialist mathematician physicist chemist
    biologist statistician investor producer marketer strategist owner president vp lead head
    sysadmin admin devops sre tester copywriter illustrator animator nanny caregiver midwife
    optometrist economist geologist astronomer historian linguist principal dean janitor
    receptionist paralegal judge diplomat politician senator mayor monk priest pastor rabbi""".split()
)

DEMONYMS = frozenset(
    """american british english scottish welsh irish canadian australian german french italian
    spanish portuguese dutch belgian swiss austrian swedish norwegian danish finnish icelandic
    polish czech slovak hungarian romanian bulgarian greek turkish russian ukrainian belarusian
    serbian croatian slovenian bosnian albanian lithuanian latvian estonian israeli lebanese
    egyptian moroccan nigerian kenyan ghanaian ethiopian south-african indian pakistani
    bangladeshi nepali chinese japanese korean vietnamese thai filipino indonesian malaysian
    singaporean mexican brazilian argentinian argentine chilean colombian peruvian venezuelan
    cuban iranian iraqi syrian saudi emirati new-zealander kiwi""".split()
)

DIETS = (
    "vegetarian",
    "vegan",
    "pescatarian",
    "keto",
    "paleo",
    "carnivore",
    "flexitarian",
    "omnivore",
    "raw vegan",
    "plant-based",
)
RESTRICTIONS = (
    "lactose intolerant",
    "lactose-intolerant",
    "gluten-free",
    "gluten free",
    "dairy-free",
    "kosher",
    "halal",
    "celiac",
    "coeliac",
    "diabetic",
)
STATUSES = (
    "single",
    "married",
    "engaged",
    "divorced",
    "widowed",
    "separated",
    "in a relationship",
    "seeing someone",
    "dating someone",
)
NOT_JOB_STATES = ("retired", "unemployed", "self-employed", "between jobs", "out of work")

#: Employer "values" that are really times or places of work ("I work at night").
NOT_EMPLOYERS = frozenset(
    "night nights home weekends the weekend a living the moment it that this least times all "
    "hours remote remotely".split()
)

#: Opinion objects that point elsewhere: "I like it" and "I hate it" may be about two things.
REFERRING = frozenset(
    "it that this them those these him her you everything nothing something anything when how what".split()
)
#: Favorites of a context ("my favorite part is the ending"), not of a person.
CONTEXTUAL_FAVORITES = frozenset("part thing bit moment one scene line episode memory quote".split())

ORGANISATIONS = frozenset(
    """council hospital university college school bank government army navy police company firm
    agency ministry department library museum clinic church embassy airline startup bakery cafe shop
    store restaurant pub hotel factory warehouse supermarket salon garage pharmacy nursery""".split()
)

#: Adjectives that make "I'm a <adjective> <noun>" a judgement instead of a job title.
JUDGEMENTS = frozenset(
    """good great bad terrible decent amazing awful excellent big huge lousy better worse natural
    born pretty very really home amateur hobby weekend aspiring wannabe former ex fantastic
    horrible wonderful poor fine proud lazy careful nervous designated backseat""".split()
)
